// Rendezvous, receiver side: match the RTS, decide unpack buffer or zero-copy
// (paper Section 5.2, third step), reply, then unpack per segment as the
// immediates arrive, or READ with scatter for P-RRS.
#include <algorithm>
#include <array>

#include "base/log.h"
#include "transport/messaging/context_impl.h"

namespace ibdt::messaging {
namespace {

Status truncation(const Operation& op, int source, int64_t messageBytes) {
  return makeError(Code::kTruncated, "message from rank ", source, " tag ", op.info.tag, " has ", messageBytes,
                   " bytes, the receive buffer takes ", op.bytes, "; those were delivered");
}

}  // namespace

void ContextImpl::handleRts(Peer& peer, const wire::Envelope& envelope, const wire::Rts& rts) {
  std::shared_ptr<Operation> op;
  auto unexpected = matching_.match(peer.rank, envelope, &op);
  if (!unexpected.isOk()) {
    failPeer(peer, unexpected.status());
    return;
  }
  if (!op) {
    (*unexpected)->kind = wire::Kind::kRts;
    (*unexpected)->rts = rts;
    return;
  }
  Status status = acceptRts(std::move(op), peer.rank, envelope, rts);
  if (!status.isOk()) failPeer(peer, status);
}

Status ContextImpl::acceptRts(std::shared_ptr<Operation> op, int source, const wire::Envelope& envelope,
                              const wire::Rts& rts) {
  IBDT_RETURN_IF_ERROR(op->ensureStats(types_));
  Peer& peer = peers_[static_cast<size_t>(source)];
  op->peer = source;
  op->info = RecvInfo{source, envelope.tag, 0, envelope.bytes, Scheme::kAuto};

  CtsDraft draft;
  draft.cts.senderTransfer = rts.senderTransfer;
  draft.cts.bytes = std::min(envelope.bytes, op->bytes);
  Status refusal = checkRtsSignature(*op, source, envelope);
  if (!refusal.isOk()) draft.cts.bytes = 0;
  if (draft.cts.bytes == 0) {
    queueCts(peer, draft.cts, {});
    complete(*op, !refusal.isOk() ? std::move(refusal) : truncation(*op, source, envelope.bytes));
    return Status::ok();
  }

  auto transfer = std::make_unique<RecvTransfer>();
  transfer->id = nextTransfer_++;
  transfer->op = op;
  transfer->senderTransfer = rts.senderTransfer;
  transfer->bytes = draft.cts.bytes;
  transfer->messageBytes = envelope.bytes;
  draft.cts.receiverTransfer = transfer->id;
  draft.cts.receiverContiguous = op->stats.contiguous;
  draft.forced = options_.forcedScheme != Scheme::kAuto ? options_.forcedScheme : static_cast<Scheme>(rts.forcedScheme);
  draft.segmentSize = segmentSizeFor(draft.cts.bytes, options_.segmentSize);
  bool unpack = selector_.replyUnpacks(envelope, rts, op->stats, draft.forced, draft.cts.bytes, draft.segmentSize);
  IBDT_ASSIGN_OR_RETURN(transfer->protocol, startReceive(*op, unpack, draft));
  unpack = transfer->protocol->unpacks();
  // The sender finalises by the same deterministic rule; record its outcome.
  op->info.scheme =
      selector_.finalScheme(static_cast<Scheme>(rts.forcedScheme), rts.senderWantsPack != 0, rts.senderContiguous != 0,
                            unpack, static_cast<Scheme>(draft.cts.scheme), op->stats.contiguous);
  IBDT_LOG(kDebug, "messaging: receive of ", draft.cts.bytes, " B from rank ", source, ": ",
           unpack ? "unpack buffer" : "zero-copy", " (mean block ", op->stats.meanBlock, " B, sender's ",
           rts.meanBlock, " B; ", schemeName(op->info.scheme), ")");
  recvTransfers_[transfer->id] = std::move(transfer);
  queueCts(peer, draft.cts, draft.layout);
  return Status::ok();
}

Status ContextImpl::checkRtsSignature(const Operation& op, int source, const wire::Envelope& envelope) const {
  // A shorter or longer message is a truncation, reported as such.
  if (envelope.bytes != op.bytes) return Status::ok();
  auto mine = datatype::signature(op.type, op.count);
  if (mine.isOk() && mine->hash == envelope.signatureHash && mine->elements == envelope.signatureElements) {
    return Status::ok();
  }
  return makeError(Code::kInvalidArgument, "message from rank ", source, " tag ", envelope.tag,
                   ": the sender's type signature does not match the receive type");
}

void ContextImpl::queueCts(Peer& peer, const wire::Cts& cts, std::span<const uint8_t> layout) {
  // Header and CTS are written into a fixed array first: written straight
  // into the freshly sized vector, GCC cannot see its size and warns.
  std::array<uint8_t, sizeof(wire::Header) + sizeof(wire::Cts)> head;
  size_t at = wire::write(head.data(), 0, wire::Header{wire::Kind::kCts, {}, 0});
  wire::write(head.data(), at, cts);
  std::vector<uint8_t> reply;
  reply.reserve(head.size() + layout.size());
  reply.insert(reply.end(), head.begin(), head.end());
  reply.insert(reply.end(), layout.begin(), layout.end());
  peer.control.push(ControlMessage(std::move(reply)));
  activePeers_.mark(peer.rank);
}

// The reply's protocol: zero-copy when chosen and possible, else unpacking.
Result<std::unique_ptr<RecvProtocol>> ContextImpl::startReceive(const Operation& op, bool unpack, CtsDraft& draft) {
  if (!unpack) {
    auto zeroCopy = makeZeroCopyReceive();
    std::string why;
    IBDT_ASSIGN_OR_RETURN(bool started, zeroCopy->start(*this, op, draft, why));
    if (started) return zeroCopy;
    IBDT_LOG(kDebug, "messaging: ", why, "; unpacking");
    draft.layout.clear();
    if (draft.forced == Scheme::kMultiW || draft.forced == Scheme::kPRrs) draft.forced = Scheme::kAuto;
  }
  auto unpacking = makeUnpackReceive(options_.ringSegments);
  std::string why;
  IBDT_RETURN_IF_ERROR(unpacking->start(*this, op, draft, why).status());
  return unpacking;
}

bool ContextImpl::layoutCached(int rank, const datatype::Datatype& type) const {
  return peers_[static_cast<size_t>(rank)].layouts.peerHolds(type);
}

void ContextImpl::layoutSent(int rank, const datatype::Datatype& type) {
  peers_[static_cast<size_t>(rank)].layouts.sentToPeer(type);
  ++counters_.layoutsSent;
}

Status ContextImpl::handleDataImm(Peer& peer, uint32_t transferId) {
  auto found = recvTransfers_.find(transferId);
  if (found == recvTransfers_.end() || found->second->op->peer != peer.rank || found->second->reading) {
    return makeError(Code::kProtocol, "rank ", peer.rank, " wrote to unknown transfer ", transferId);
  }
  RecvTransfer& transfer = *found->second;
  Operation& op = *transfer.op;
  IBDT_ASSIGN_OR_RETURN(bool all, transfer.protocol->onWrite(*this, op, transfer.senderTransfer, transfer.bytes));
  if (!all) return Status::ok();
  op.info.bytes = transfer.bytes;
  complete(op,
           transfer.bytes < transfer.messageBytes ? truncation(op, peer.rank, transfer.messageBytes) : Status::ok());
  recvTransfers_.erase(found);
  return Status::ok();
}

Status ContextImpl::handlePacked(Peer& peer, const wire::Packed& packed) {
  auto found = recvTransfers_.find(packed.receiverTransfer);
  if (found == recvTransfers_.end() || found->second->op->peer != peer.rank || found->second->protocol->unpacks() ||
      found->second->reading) {
    return makeError(Code::kProtocol, "rank ", peer.rank, " offered packed data for unknown transfer ",
                     packed.receiverTransfer);
  }
  if (packed.length < static_cast<uint64_t>(found->second->bytes)) {
    return makeError(Code::kProtocol, "rank ", peer.rank, " offered ", packed.length, " packed bytes for transfer ",
                     packed.receiverTransfer, " of ", found->second->bytes);
  }
  found->second->reading = true;
  found->second->packed = packed;
  found->second->op->info.scheme = Scheme::kPRrs;
  peer.activeReads.push_back(packed.receiverTransfer);
  activePeers_.mark(peer.rank);
  return advanceReads(peer, *found->second);
}

Status ContextImpl::advanceReads(Peer& peer, RecvTransfer& transfer) {
  uint32_t maxReads = std::max<uint32_t>(1, domain_.caps().maxReadsInFlight);
  Operation& op = *transfer.op;
  const UserRegistration& registration = *transfer.protocol->registration();
  std::vector<datatype::Iovec> iovecs(maxSge_);
  std::vector<fabric::Sge> sges(maxSge_);
  while (transfer.readNext < transfer.bytes && peer.sendOutstanding < sendQueueDepth_ &&
         peer.readsOutstanding < maxReads) {
    int64_t last = std::min<int64_t>(transfer.bytes, transfer.readNext + static_cast<int64_t>(maxWrBytes_));
    IBDT_ASSIGN_OR_RETURN(auto fill, op.segment->iovecs(reinterpret_cast<uint64_t>(op.recvBuffer), transfer.readNext,
                                                        last, iovecs.data(), maxSge_));
    for (size_t i = 0; i < fill.entries; ++i) {
      sges[i] = {iovecs[i].address, static_cast<uint32_t>(iovecs[i].length),
                 registration.lkey(iovecs[i].address, iovecs[i].length)};
    }
    fabric::SendRequest request;
    request.id = wrId(WrKind::kRead, transfer.id);
    request.opcode = fabric::Opcode::kRead;
    request.sgList = sges.data();
    request.numSge = static_cast<uint32_t>(fill.entries);
    request.remoteAddress = transfer.packed.address + static_cast<uint64_t>(transfer.readNext);
    request.rkey = transfer.packed.rkey;
    IBDT_RETURN_IF_ERROR(peer.sendEndpoint->postSend(request));
    ++peer.sendOutstanding;
    ++peer.readsOutstanding;
    ++transfer.readsPosted;
    transfer.readNext += fill.bytes;
  }
  return Status::ok();
}

Status ContextImpl::onReadCompleted(uint32_t transferId) {
  auto found = recvTransfers_.find(transferId);
  if (found == recvTransfers_.end()) return makeError(Code::kInternal, "read for unknown transfer ", transferId);
  RecvTransfer& transfer = *found->second;
  ++transfer.readsCompleted;
  if (transfer.readNext < transfer.bytes || transfer.readsCompleted < transfer.readsPosted) return Status::ok();
  Peer& peer = peers_[static_cast<size_t>(transfer.op->peer)];
  std::vector<uint8_t> fin(sizeof(wire::Header) + sizeof(wire::Fin));
  size_t at = wire::write(fin.data(), 0, wire::Header{wire::Kind::kFin, {}, 0});
  wire::write(fin.data(), at, wire::Fin{transfer.senderTransfer, 0});
  peer.control.push(ControlMessage(std::move(fin)));
  activePeers_.mark(peer.rank);
  Operation& op = *transfer.op;
  op.info.bytes = transfer.bytes;
  complete(op,
           transfer.bytes < transfer.messageBytes ? truncation(op, peer.rank, transfer.messageBytes) : Status::ok());
  recvTransfers_.erase(found);
  return Status::ok();
}

}  // namespace ibdt::messaging
