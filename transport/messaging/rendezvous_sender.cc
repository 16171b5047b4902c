// Rendezvous, sender side: RTS with the datatype statistics, the final
// decision by Table 1 when the CTS arrives, then the data phase: a walk over
// the packed byte stream [0, bytes) whose writes the scheme's protocol
// object describes (send_protocol.h). Writes go out as chained lists (or
// one by one with listPost off) within the send queue depth; every
// immediate consumes one of the peer's credits.
#include <algorithm>

#include "base/log.h"
#include "transport/messaging/context_impl.h"

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

// A receiver layout (or count) from the peer that does not decode: its
// fault whatever the datatype layer calls it.
Status unusableLayout(const Peer& peer, const wire::Cts& cts, const Status& why) {
  return makeError(Code::kProtocol, "rank ", peer.rank, " sent an unusable layout (count ", cts.count,
                   ") for transfer ", cts.senderTransfer, ": ", why.toString());
}

}  // namespace

Result<std::vector<uint8_t>> ContextImpl::buildRts(SendTransfer& transfer) {
  Operation& op = *transfer.op;
  IBDT_ASSIGN_OR_RETURN(auto signature, datatype::signature(op.type, op.count));
  wire::Envelope envelope{rank_, op.tag, op.communicator, 0, op.bytes, signature.hash, signature.elements};
  wire::Rts rts{};
  rts.senderTransfer = transfer.id;
  rts.senderContiguous = op.stats.contiguous;
  rts.senderWantsPack = transfer.wantsPack;
  rts.forcedScheme = static_cast<uint8_t>(options_.forcedScheme);
  rts.blockCount = op.stats.blockCount;
  rts.meanBlock = op.stats.meanBlock;
  rts.medianBlock = op.stats.medianBlock;
  rts.stddevBlock = op.stats.stddevBlock;
  std::vector<uint8_t> bytes(sizeof(wire::Header) + sizeof(envelope) + sizeof(rts));
  size_t at = wire::write(bytes.data(), 0, wire::Header{wire::Kind::kRts, {}, 0});
  at = wire::write(bytes.data(), at, envelope);
  wire::write(bytes.data(), at, rts);
  return bytes;
}

// ProtocolServices: Multi-W to a noncontiguous receiver, its layout sent with
// this reply or cached from an earlier one (Section 4.4.2).
Result<datatype::Segment> ContextImpl::receiverLayout(int rank, const wire::Cts& cts,
                                                      std::span<const uint8_t> layout) {
  Peer& peer = peers_[static_cast<size_t>(rank)];
  const datatype::Datatype* receiverType = peer.layouts.received(cts.typeId, cts.typeVersion);
  if (!layout.empty()) {
    auto type = datatype::deserialize(layout);
    if (!type.isOk()) return unusableLayout(peer, cts, type.status());
    receiverType = &peer.layouts.store(cts.typeId, cts.typeVersion, std::move(type).value());
  } else if (receiverType == nullptr) {
    return makeError(Code::kProtocol, "rank ", peer.rank, " refers to layout (", cts.typeId, ", ", cts.typeVersion,
                     ") it never sent, for transfer ", cts.senderTransfer);
  } else {
    ++counters_.layoutCacheHits;
  }
  auto segment = datatype::Segment::create(*receiverType, cts.count);
  if (!segment.isOk()) return unusableLayout(peer, cts, segment.status());
  if (segment->size() < cts.bytes) {
    return makeError(Code::kProtocol, "rank ", peer.rank, "'s layout holds ", segment->size(), " bytes, it accepted ",
                     cts.bytes, " for transfer ", cts.senderTransfer);
  }
  return segment;
}

void ContextImpl::queueControl(int rank, std::vector<uint8_t> bytes) {
  peers_[static_cast<size_t>(rank)].control.push(ControlMessage(std::move(bytes)));
  activePeers_.mark(rank);
}

Status ContextImpl::handleCts(Peer& peer, const wire::Cts& cts, std::span<const uint8_t> layout) {
  auto found = sendTransfers_.find(cts.senderTransfer);
  if (found == sendTransfers_.end() || found->second->op->peer != peer.rank || found->second->replied ||
      cts.bytes < 0 || cts.bytes > found->second->op->bytes ||
      (cts.bytes > 0 && cts.mode != wire::ReplyMode::kUnpack && cts.mode != wire::ReplyMode::kZeroCopy)) {
    return makeError(Code::kProtocol, "rank ", peer.rank, " sent an invalid reply for transfer ", cts.senderTransfer);
  }
  SendTransfer& transfer = *found->second;
  Operation& op = *transfer.op;
  transfer.replied = true;
  transfer.cts = cts;
  if (cts.bytes == 0) {  // the receiver takes nothing (truncated to zero or refused)
    complete(op, Status::ok());
    sendTransfers_.erase(found);
    return Status::ok();
  }
  bool unpack = cts.mode == wire::ReplyMode::kUnpack;
  if (!offersEnough(cts)) {
    return makeError(Code::kProtocol, "rank ", peer.rank, " offered ", cts.remoteLength, " bytes for transfer ",
                     cts.senderTransfer, " of ", cts.bytes, " bytes (",
                     unpack ? strCat(cts.ringSegments, " segments of ", cts.segmentSize, " bytes of staging")
                            : std::string("contiguous receive buffer"),
                     ")");
  }
  Scheme scheme = selector_.finalScheme(options_.forcedScheme, transfer.wantsPack, op.stats.contiguous, unpack,
                                        static_cast<Scheme>(cts.scheme), cts.receiverContiguous != 0);
  ++counters_.schemeCount[static_cast<int>(scheme)];
  IBDT_LOG(kDebug, "messaging: send of ", cts.bytes, " B to rank ", peer.rank, ": ", schemeName(scheme), " (sender ",
           transfer.wantsPack ? "packs" : "zero-copy", ", mean block ", op.stats.meanBlock, " B; receiver ",
           unpack ? "unpacks" : "zero-copy", ")");
  transfer.protocol = makeSendProtocol(scheme);
  IBDT_ASSIGN_OR_RETURN(bool writes, transfer.protocol->start(*this, op, cts, layout));
  if (!writes) {  // the receiver reads (P-RRS)
    transfer.waitingForFin = true;
    transfer.next = cts.bytes;
    return Status::ok();
  }
  peer.activeSends.push_back(transfer.id);
  activePeers_.mark(peer.rank);
  return advanceSend(peer, transfer);
}

// The next write of `transfer`, from packed byte `next` to the end of its
// segment (unpack replies signal each segment, zero-copy ones only the
// end) or the largest write; none while the ring slot it needs is in use.
std::optional<WriteSlice> ContextImpl::nextSlice(const SendTransfer& transfer) const {
  const wire::Cts& cts = transfer.cts;
  const bool unpack = cts.mode == wire::ReplyMode::kUnpack;
  WriteSlice slice;
  slice.begin = transfer.next;
  slice.signalAt = cts.bytes;
  if (unpack) slice.signalAt = std::min(cts.bytes, (slice.begin / cts.segmentSize + 1) * cts.segmentSize);
  slice.end = std::min(slice.signalAt, slice.begin + static_cast<int64_t>(maxWrBytes_));
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

fabric::SendRequest ContextImpl::writeRequest(const SendTransfer& transfer, const WriteSlice& slice,
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

Status ContextImpl::advanceSend(Peer& peer, SendTransfer& transfer) {
  const Operation& op = *transfer.op;
  uint32_t room = sendQueueDepth_ - std::min(sendQueueDepth_, peer.sendOutstanding);
  // Scratch kept across calls; sized once so requests may point into sges.
  std::vector<fabric::SendRequest>& requests = scratch_.requests;
  std::vector<fabric::Sge>& sges = scratch_.sges;
  requests.clear();
  sges.clear();
  requests.reserve(sendQueueDepth_);
  sges.reserve(static_cast<size_t>(sendQueueDepth_) * maxSge_);
  scratch_.iovecs.resize(maxSge_);

  while (transfer.next < transfer.cts.bytes) {
    // listPost off: one post per write (the paper's "single post many times").
    if (requests.size() == room || (!options_.listPost && !requests.empty())) {
      IBDT_RETURN_IF_ERROR(post(peer, requests));
      room = sendQueueDepth_ - std::min(sendQueueDepth_, peer.sendOutstanding);
      sges.clear();
      if (room == 0) break;
    }
    std::optional<WriteSlice> slice = nextSlice(transfer);
    if (!slice) break;
    size_t sgeStart = sges.size();
    IBDT_ASSIGN_OR_RETURN(bool described,
                          transfer.protocol->describe(*this, op, transfer.cts, *slice, {sges, scratch_.iovecs}));
    if (!described) break;
    if (slice->signals() && credits_.available(peer.rank) == 0) {
      sges.resize(sgeStart);
      break;
    }
    requests.push_back(writeRequest(transfer, *slice, std::span(sges).subspan(sgeStart)));
    if (slice->signals()) credits_.spend(peer.rank);
    ++transfer.posted;
    if (slice->staging) transfer.inFlight.emplace_back(transfer.posted, std::move(slice->staging));
    transfer.next = slice->end;
  }
  return post(peer, requests);
}

Status ContextImpl::onSendDataCompleted(uint32_t transferId) {
  auto found = sendTransfers_.find(transferId);
  if (found == sendTransfers_.end()) return makeError(Code::kInternal, "write for unknown transfer ", transferId);
  SendTransfer& transfer = *found->second;
  ++transfer.completed;
  // Requests of one endpoint complete in order: staging up to here is free.
  while (!transfer.inFlight.empty() && transfer.inFlight.front().first <= transfer.completed) {
    transfer.inFlight.pop_front();
  }
  if (transfer.next == transfer.cts.bytes && transfer.completed == transfer.posted && !transfer.waitingForFin) {
    complete(*transfer.op, Status::ok());
    sendTransfers_.erase(found);
  }
  return Status::ok();
}

Status ContextImpl::handleRelease(Peer& peer, const wire::Release& release) {
  auto found = sendTransfers_.find(release.senderTransfer);
  if (found == sendTransfers_.end() || found->second->op->peer != peer.rank || !found->second->replied) {
    return makeError(Code::kProtocol, "rank ", peer.rank, " released staging of unknown transfer ",
                     release.senderTransfer);
  }
  SendTransfer& transfer = *found->second;
  const wire::Cts& cts = transfer.cts;
  uint64_t segments = wire::segmentCount(cts.bytes, cts.segmentSize);
  if (cts.ringSegments == 0 || release.segments < transfer.released || release.segments > segments) {
    return makeError(Code::kProtocol, "rank ", peer.rank, " released ", release.segments, " of ", segments,
                     " segments (", transfer.released, " already) of transfer ", release.senderTransfer);
  }
  transfer.released = release.segments;
  return Status::ok();
}

Status ContextImpl::handleFin(Peer& peer, const wire::Fin& fin) {
  auto found = sendTransfers_.find(fin.senderTransfer);
  if (found == sendTransfers_.end() || found->second->op->peer != peer.rank || !found->second->waitingForFin) {
    return makeError(Code::kProtocol, "rank ", peer.rank, " finished unknown transfer ", fin.senderTransfer);
  }
  complete(*found->second->op, Status::ok());
  sendTransfers_.erase(found);
  return Status::ok();
}

}  // namespace ibdt::messaging
