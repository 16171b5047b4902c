// Rendezvous, receiver side (rendezvous_receiver.h).
#include "transport/messaging/rendezvous_receiver.h"

#include <algorithm>
#include <array>
#include <string>

#include "base/log.h"

namespace ibdt::messaging {
namespace {

Status truncation(const Operation& op, int source, int64_t messageBytes) {
  return makeError(Code::kTruncated, "message from rank ", source, " tag ", op.info.tag, " has ", messageBytes,
                   " bytes, the receive buffer takes ", op.bytes, "; those were delivered");
}

Status checkRtsSignature(const Operation& op, int source, const wire::Envelope& envelope) {
  // A shorter or longer message is a truncation, reported as such.
  if (envelope.bytes != op.bytes) return Status::ok();
  auto mine = datatype::signature(op.type, op.count);
  if (mine.isOk() && mine->hash == envelope.signatureHash && mine->elements == envelope.signatureElements) {
    return Status::ok();
  }
  return makeError(Code::kInvalidArgument, "message from rank ", source, " tag ", envelope.tag,
                   ": the sender's type signature does not match the receive type");
}

}  // namespace

Status RendezvousReceiver::accept(std::shared_ptr<Operation> op, int source, const wire::Envelope& envelope,
                                  const wire::Rts& rts) {
  IBDT_RETURN_IF_ERROR(op->ensureStats(types_));
  op->peer = source;
  op->info = RecvInfo{source, envelope.tag, 0, envelope.bytes, Scheme::kAuto};

  CtsDraft draft;
  draft.cts.senderTransfer = rts.senderTransfer;
  draft.cts.bytes = std::min(envelope.bytes, op->bytes);
  Status refusal = checkRtsSignature(*op, source, envelope);
  if (!refusal.isOk()) draft.cts.bytes = 0;
  if (draft.cts.bytes == 0) {
    queueCts(source, draft.cts, {});
    completeOperation(*op, !refusal.isOk() ? std::move(refusal) : truncation(*op, source, envelope.bytes));
    return Status::ok();
  }
  return reply(std::move(op), source, envelope, rts, draft);
}

// A transfer for the receive, its reply's protocol and the CTS.
Status RendezvousReceiver::reply(std::shared_ptr<Operation> op, int source, const wire::Envelope& envelope,
                                 const wire::Rts& rts, CtsDraft& draft) {
  auto transfer = std::make_unique<RecvTransfer>();
  transfer->id = ids_.next();
  transfer->op = op;
  transfer->senderTransfer = rts.senderTransfer;
  transfer->bytes = draft.cts.bytes;
  transfer->messageBytes = envelope.bytes;
  draft.cts.receiverTransfer = transfer->id;
  draft.cts.receiverContiguous = op->stats.contiguous;
  draft.forced = selector_.forcedReply(rts);
  draft.segmentSize = selector_.replySegmentSize(draft.cts.bytes);
  bool unpack = selector_.replyUnpacks(envelope, rts, op->stats, draft.forced, draft.cts.bytes, draft.segmentSize);
  IBDT_ASSIGN_OR_RETURN(transfer->protocol, startReceive(*op, unpack, draft));
  unpack = transfer->protocol->unpacks();
  // The sender finalises by the same deterministic rule; record its outcome.
  op->info.scheme =
      selector_.finalScheme(static_cast<Scheme>(rts.forcedScheme), rts.senderWantsPack != 0, rts.senderContiguous != 0,
                            unpack, static_cast<Scheme>(draft.cts.scheme), op->stats.contiguous);
  IBDT_LOG(kDebug, "messaging: receive of ", draft.cts.bytes, " B from rank ", source, ": ",
           unpack ? "unpack buffer" : "zero-copy", " (mean block ", op->stats.meanBlock, " B, sender's ", rts.meanBlock,
           " B; ", schemeName(op->info.scheme), ")");
  transfers_[transfer->id] = std::move(transfer);
  queueCts(source, draft.cts, draft.layout);
  return Status::ok();
}

void RendezvousReceiver::queueCts(int rank, const wire::Cts& cts, std::span<const uint8_t> layout) {
  // Header and CTS are written into a fixed array first: written straight
  // into the freshly sized vector, GCC cannot see its size and warns.
  std::array<uint8_t, sizeof(wire::Header) + sizeof(wire::Cts)> head;
  size_t at = wire::write(head.data(), 0, wire::Header{wire::Kind::kCts, 0, {}, 0});
  wire::write(head.data(), at, cts);
  std::vector<uint8_t> reply;
  reply.reserve(head.size() + layout.size());
  reply.insert(reply.end(), head.begin(), head.end());
  reply.insert(reply.end(), layout.begin(), layout.end());
  services_.queueControl(rank, std::move(reply));
}

// The reply's protocol: zero-copy when chosen and possible, else unpacking.
Result<std::unique_ptr<RecvProtocol>> RendezvousReceiver::startReceive(const Operation& op, bool unpack,
                                                                       CtsDraft& draft) {
  if (!unpack) {
    auto zeroCopy = selector_.zeroCopyReply();
    std::string why;
    IBDT_ASSIGN_OR_RETURN(bool started, zeroCopy->start(services_, op, draft, why));
    if (started) return zeroCopy;
    IBDT_LOG(kDebug, "messaging: ", why, "; unpacking");
    draft.layout.clear();
    if (draft.forced == Scheme::kMultiW || draft.forced == Scheme::kPRrs) draft.forced = Scheme::kAuto;
  }
  auto unpacking = selector_.unpackReply();
  std::string why;
  IBDT_RETURN_IF_ERROR(unpacking->start(services_, op, draft, why).status());
  return unpacking;
}

Status RendezvousReceiver::onWriteImm(int rank, uint32_t transferId) {
  auto found = transfers_.find(transferId);
  if (found == transfers_.end() || found->second->op->peer != rank || found->second->read) {
    return makeError(Code::kProtocol, "rank ", rank, " wrote to unknown transfer ", transferId);
  }
  RecvTransfer& transfer = *found->second;
  IBDT_ASSIGN_OR_RETURN(bool all,
                        transfer.protocol->onWrite(services_, *transfer.op, transfer.senderTransfer, transfer.bytes));
  if (all) finish(transferId);
  return Status::ok();
}

Status RendezvousReceiver::onPacked(int rank, const wire::Packed& packed) {
  auto found = transfers_.find(packed.receiverTransfer);
  if (found == transfers_.end() || found->second->op->peer != rank || found->second->protocol->unpacks() ||
      found->second->read) {
    return makeError(Code::kProtocol, "rank ", rank, " offered packed data for unknown transfer ",
                     packed.receiverTransfer);
  }
  RecvTransfer& transfer = *found->second;
  if (packed.length < static_cast<uint64_t>(transfer.bytes)) {
    return makeError(Code::kProtocol, "rank ", rank, " offered ", packed.length, " packed bytes for transfer ",
                     packed.receiverTransfer, " of ", transfer.bytes);
  }
  transfer.read.emplace(transfer.id, packed, transfer.bytes);
  transfer.op->info.scheme = Scheme::kPRrs;
  if (active_.size() <= static_cast<size_t>(rank)) active_.resize(static_cast<size_t>(rank) + 1);
  active_[static_cast<size_t>(rank)].push_back(transfer.id);
  services_.wake(rank);
  return transfer.read->advance(services_, rank, *transfer.op, *transfer.protocol->registration());
}

Status RendezvousReceiver::advance(int rank) {
  if (!hasWork(rank)) return Status::ok();
  return advanceListed(
      active_[static_cast<size_t>(rank)], transfers_,
      [&](RecvTransfer& t) { return t.read->advance(services_, rank, *t.op, *t.protocol->registration()); },
      [](const RecvTransfer& t) { return t.read->allPosted(); });
}

Status RendezvousReceiver::onReadCompleted(uint32_t transferId) {
  auto found = transfers_.find(transferId);
  if (found == transfers_.end() || !found->second->read) {
    return makeError(Code::kInternal, "read for unknown transfer ", transferId);
  }
  RecvTransfer& transfer = *found->second;
  if (!transfer.read->readCompleted()) return Status::ok();
  std::vector<uint8_t> fin(sizeof(wire::Header) + sizeof(wire::Fin));
  size_t at = wire::write(fin.data(), 0, wire::Header{wire::Kind::kFin, 0, {}, 0});
  wire::write(fin.data(), at, wire::Fin{transfer.senderTransfer, 0});
  services_.queueControl(transfer.op->peer, std::move(fin));
  finish(transferId);
  return Status::ok();
}

// All bytes are in the receive: it completes (truncated if the message was longer).
void RendezvousReceiver::finish(uint32_t transferId) {
  auto found = transfers_.find(transferId);
  RecvTransfer& transfer = *found->second;
  Operation& op = *transfer.op;
  op.info.bytes = transfer.bytes;
  completeOperation(
      op, transfer.bytes < transfer.messageBytes ? truncation(op, op.peer, transfer.messageBytes) : Status::ok());
  transfers_.erase(found);
}

bool RendezvousReceiver::involves(int rank) const { return anyTransferWith(transfers_, rank); }

Status RendezvousReceiver::checkPeerClosed(int rank) const {
  for (const auto& [id, transfer] : transfers_) {
    if (transfer->op->peer == rank) {
      return makeError(Code::kProtocol, "rank ", rank, " closed before finishing transfer ", id, " to us");
    }
  }
  return Status::ok();
}

void RendezvousReceiver::failPeer(int rank, const Status& failure) {
  failTransfersWith(transfers_, active_, rank, failure);
}

}  // namespace ibdt::messaging
