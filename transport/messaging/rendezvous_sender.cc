// Rendezvous, sender side (rendezvous_sender.h).
#include "transport/messaging/rendezvous_sender.h"

#include <algorithm>
#include <string>

#include "base/log.h"

namespace ibdt::messaging {
namespace {

// Whether the memory a reply offers holds what will be written into it: the
// staging ring (or the whole message) of an unpack reply, the message for a
// contiguous zero-copy receiver. The peer chose every field, so nothing here
// may overflow. (A noncontiguous receiver's blocks are bounded by its rkey.)
bool offersEnough(const wire::Cts& cts) {
  const auto bytes = static_cast<uint64_t>(cts.bytes);
  if (cts.mode == wire::ReplyMode::kZeroCopy) return !cts.receiverContiguous || cts.remoteLength >= bytes;
  if (cts.segmentSize <= 0) return false;
  if (cts.ringSegments == 0) return cts.remoteLength >= bytes;
  return cts.remoteLength / cts.ringSegments >= static_cast<uint64_t>(cts.segmentSize);
}

Status offersTooLittle(int rank, const wire::Cts& cts) {
  const bool unpack = cts.mode == wire::ReplyMode::kUnpack;
  return makeError(Code::kProtocol, "rank ", rank, " offered ", cts.remoteLength, " bytes for transfer ",
                   cts.senderTransfer, " of ", cts.bytes, " bytes (",
                   unpack ? strCat(cts.ringSegments, " segments of ", cts.segmentSize, " bytes of staging")
                          : std::string("contiguous receive buffer"),
                   ")");
}

}  // namespace

Result<std::vector<uint8_t>> RendezvousSender::start(std::shared_ptr<Operation> op) {
  auto transfer = std::make_unique<SendTransfer>();
  transfer->id = ids_.next();
  transfer->op = std::move(op);
  transfer->wantsPack = selector_.rendezvousPacks(transfer->op->stats);
  IBDT_ASSIGN_OR_RETURN(auto rts, buildRts(*transfer));
  transfers_[transfer->id] = std::move(transfer);
  return rts;
}

Result<std::vector<uint8_t>> RendezvousSender::buildRts(const SendTransfer& transfer) const {
  const Operation& op = *transfer.op;
  IBDT_ASSIGN_OR_RETURN(auto signature, datatype::signature(op.type, op.count));
  wire::Envelope envelope{services_.selfRank(), op.tag, op.communicator, 0, op.bytes, signature.hash,
                          signature.elements};
  wire::Rts rts{};
  rts.senderTransfer = transfer.id;
  rts.senderContiguous = op.stats.contiguous;
  rts.senderWantsPack = transfer.wantsPack;
  rts.forcedScheme = static_cast<uint8_t>(selector_.requestedScheme(op.stats));
  rts.blockCount = op.stats.blockCount;
  rts.meanBlock = op.stats.meanBlock;
  rts.medianBlock = op.stats.medianBlock;
  rts.stddevBlock = op.stats.stddevBlock;
  std::vector<uint8_t> bytes(sizeof(wire::Header) + sizeof(envelope) + sizeof(rts));
  size_t at = wire::write(bytes.data(), 0, wire::Header{wire::Kind::kRts, 0, {}, 0});
  at = wire::write(bytes.data(), at, envelope);
  wire::write(bytes.data(), at, rts);
  return bytes;
}

Status RendezvousSender::onCts(int rank, const wire::Cts& cts, std::span<const uint8_t> layout) {
  auto found = transfers_.find(cts.senderTransfer);
  if (found == transfers_.end() || found->second->op->peer != rank || found->second->replied || cts.bytes < 0 ||
      cts.bytes > found->second->op->bytes ||
      (cts.bytes > 0 && cts.mode != wire::ReplyMode::kUnpack && cts.mode != wire::ReplyMode::kZeroCopy)) {
    return makeError(Code::kProtocol, "rank ", rank, " sent an invalid reply for transfer ", cts.senderTransfer);
  }
  SendTransfer& transfer = *found->second;
  transfer.replied = true;
  transfer.cts = cts;
  if (cts.bytes == 0) {  // the receiver takes nothing (truncated to zero or refused)
    finish(transfer.id);
    return Status::ok();
  }
  if (!offersEnough(cts)) return offersTooLittle(rank, cts);
  return startData(rank, transfer, layout);
}

// The final scheme by Table 1, its protocol object, and the first writes.
Status RendezvousSender::startData(int rank, SendTransfer& transfer, std::span<const uint8_t> layout) {
  const wire::Cts& cts = transfer.cts;
  const Operation& op = *transfer.op;
  const bool unpack = cts.mode == wire::ReplyMode::kUnpack;
  SendChoice choice = selector_.sendProtocol(transfer.wantsPack, op.stats, cts);
  const Scheme scheme = choice.scheme;
  ++counters_.schemeCount[static_cast<int>(scheme)];
  IBDT_LOG(kDebug, "messaging: send of ", cts.bytes, " B to rank ", rank, ": ", schemeName(scheme), " (sender ",
           transfer.wantsPack ? "packs" : "zero-copy", ", mean block ", op.stats.meanBlock, " B; receiver ",
           unpack ? "unpacks" : "zero-copy", ")");
  transfer.protocol = std::move(choice.protocol);
  IBDT_ASSIGN_OR_RETURN(bool writes, transfer.protocol->start(services_, op, cts, layout));
  if (!writes) {  // the receiver reads (P-RRS)
    transfer.waitingForFin = true;
    transfer.next = cts.bytes;
    return Status::ok();
  }
  if (active_.size() <= static_cast<size_t>(rank)) active_.resize(static_cast<size_t>(rank) + 1);
  active_[static_cast<size_t>(rank)].push_back(transfer.id);
  services_.wake(rank);
  return advanceTransfer(rank, transfer);
}

// The next write of `transfer`, from packed byte `next` to the end of its
// segment (unpack replies signal each segment, zero-copy ones only the
// end) or the largest write; none while the ring slot it needs is in use.
std::optional<WriteSlice> RendezvousSender::nextSlice(const SendTransfer& transfer) const {
  const wire::Cts& cts = transfer.cts;
  const bool unpack = cts.mode == wire::ReplyMode::kUnpack;
  WriteSlice slice;
  slice.begin = transfer.next;
  slice.signalAt = cts.bytes;
  if (unpack) slice.signalAt = std::min(cts.bytes, (slice.begin / cts.segmentSize + 1) * cts.segmentSize);
  slice.end = std::min(slice.signalAt, slice.begin + static_cast<int64_t>(services_.maxWriteBytes()));
  slice.remote = cts.remoteAddress + static_cast<uint64_t>(slice.begin);
  if (unpack && cts.ringSegments != 0) {
    // Segment s goes to ring slot s mod ringSegments once the receiver freed it.
    auto segment = static_cast<uint64_t>(slice.begin / cts.segmentSize);
    if (segment >= transfer.released + cts.ringSegments) return std::nullopt;
    slice.remote = cts.remoteAddress + (segment % cts.ringSegments) * static_cast<uint64_t>(cts.segmentSize) +
                   static_cast<uint64_t>(slice.begin % cts.segmentSize);
  }
  return slice;
}

fabric::SendRequest RendezvousSender::writeRequest(const SendTransfer& transfer, const WriteSlice& slice,
                                                   std::span<fabric::Sge> sges) const {
  fabric::SendRequest request;
  request.id = wrId(WrKind::kSendData, transfer.id);
  request.opcode = slice.signals() ? fabric::Opcode::kWriteWithImm : fabric::Opcode::kWrite;
  request.flags = fabric::kSignaled;
  request.sgList = sges.data();
  request.numSge = static_cast<uint32_t>(sges.size());
  request.immData = slice.signals() ? transfer.cts.receiverTransfer : 0;
  request.remoteAddress = slice.remote;
  request.rkey = transfer.cts.rkey;
  return request;
}

Status RendezvousSender::advance(int rank) {
  if (!hasWork(rank)) return Status::ok();
  return advanceListed(
      active_[static_cast<size_t>(rank)], transfers_,
      [&](SendTransfer& transfer) { return advanceTransfer(rank, transfer); },
      [](const SendTransfer& transfer) { return transfer.next == transfer.cts.bytes; });
}

Status RendezvousSender::advanceTransfer(int rank, SendTransfer& transfer) {
  const Operation& op = *transfer.op;
  const uint32_t depth = services_.sendQueueDepth();
  const uint32_t maxSge = services_.maxSgePerRequest();
  uint32_t room = services_.sendRoom(rank);
  // Scratch kept across calls; sized once so requests may point into sges.
  std::vector<fabric::SendRequest>& requests = scratch_.requests;
  std::vector<fabric::Sge>& sges = scratch_.sges;
  requests.clear();
  sges.clear();
  requests.reserve(depth);
  sges.reserve(static_cast<size_t>(depth) * maxSge);
  scratch_.iovecs.resize(maxSge);

  while (transfer.next < transfer.cts.bytes) {
    // listPost off: one post per write (the paper's "single post many times").
    if (requests.size() == room || (!options_.listPost && !requests.empty())) {
      IBDT_RETURN_IF_ERROR(services_.postWrites(rank, requests));
      room = services_.sendRoom(rank);
      sges.clear();
      if (room == 0) break;
    }
    std::optional<WriteSlice> slice = nextSlice(transfer);
    if (!slice) break;
    size_t sgeStart = sges.size();
    IBDT_ASSIGN_OR_RETURN(bool described,
                          transfer.protocol->describe(services_, op, transfer.cts, *slice, {sges, scratch_.iovecs}));
    if (!described) break;
    if (slice->signals() && !services_.creditFree(rank)) {
      sges.resize(sgeStart);
      break;
    }
    requests.push_back(writeRequest(transfer, *slice, std::span(sges).subspan(sgeStart)));
    if (slice->signals()) services_.spendCredit(rank);
    ++transfer.posted;
    if (slice->staging) transfer.inFlight.emplace_back(transfer.posted, std::move(slice->staging));
    transfer.next = slice->end;
  }
  return services_.postWrites(rank, requests);
}

Status RendezvousSender::onWriteCompleted(uint32_t transferId) {
  auto found = transfers_.find(transferId);
  if (found == transfers_.end()) return makeError(Code::kInternal, "write for unknown transfer ", transferId);
  SendTransfer& transfer = *found->second;
  ++transfer.completed;
  // Requests of one endpoint complete in order: staging up to here is free.
  while (!transfer.inFlight.empty() && transfer.inFlight.front().first <= transfer.completed) {
    transfer.inFlight.pop_front();
  }
  if (transfer.next == transfer.cts.bytes && transfer.completed == transfer.posted && !transfer.waitingForFin) {
    finish(transferId);
  }
  return Status::ok();
}

Status RendezvousSender::onRelease(int rank, const wire::Release& release) {
  auto found = transfers_.find(release.senderTransfer);
  if (found == transfers_.end() || found->second->op->peer != rank || !found->second->replied) {
    return makeError(Code::kProtocol, "rank ", rank, " released staging of unknown transfer ", release.senderTransfer);
  }
  SendTransfer& transfer = *found->second;
  const wire::Cts& cts = transfer.cts;
  uint64_t segments = wire::segmentCount(cts.bytes, cts.segmentSize);
  if (cts.ringSegments == 0 || release.segments < transfer.released || release.segments > segments) {
    return makeError(Code::kProtocol, "rank ", rank, " released ", release.segments, " of ", segments, " segments (",
                     transfer.released, " already) of transfer ", release.senderTransfer);
  }
  transfer.released = release.segments;
  return Status::ok();
}

Status RendezvousSender::onFin(int rank, const wire::Fin& fin) {
  auto found = transfers_.find(fin.senderTransfer);
  if (found == transfers_.end() || found->second->op->peer != rank || !found->second->waitingForFin) {
    return makeError(Code::kProtocol, "rank ", rank, " finished unknown transfer ", fin.senderTransfer);
  }
  finish(fin.senderTransfer);
  return Status::ok();
}

void RendezvousSender::finish(uint32_t transferId) {
  auto found = transfers_.find(transferId);
  completeOperation(*found->second->op, Status::ok());
  transfers_.erase(found);
}

bool RendezvousSender::involves(int rank) const { return anyTransferWith(transfers_, rank); }

Status RendezvousSender::checkPeerClosed(int rank) const {
  for (const auto& [id, transfer] : transfers_) {
    // Writes all posted may have reached it before their completions reach us.
    bool owed = transfer->waitingForFin || (transfer->replied && transfer->next < transfer->cts.bytes);
    if (transfer->op->peer == rank && owed) {
      return makeError(Code::kProtocol, "rank ", rank, " closed before finishing transfer ", id, " from us");
    }
  }
  return Status::ok();
}

void RendezvousSender::failPeer(int rank, const Status& failure) {
  failTransfersWith(transfers_, active_, rank, failure);
}

}  // namespace ibdt::messaging
