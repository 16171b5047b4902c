// Rendezvous, sender side: RTS with the datatype statistics, the final
// decision by Table 1 when the CTS arrives, then the data phase of each
// scheme as a walk over the packed byte stream [0, bytes):
//   BC-SPUP  pack [p, segment end) into a pool buffer, WRITE_WITH_IMM it;
//   RWG-UP   gather the user blocks of [p, segment end), max_sge per write,
//            the segment's last write carries the immediate;
//   Multi-W  one write per receiver block, gathering the sender blocks that
//            cover it (one write per block pair when both are irregular);
//   Contig   one write per max message size;
//   Generic  pack everything into a fresh buffer, one write;
//   P-RRS    pack (or expose a contiguous buffer) and let the receiver READ.
// Writes go out as chained lists (or one by one with listPost off) within
// the send queue depth; every immediate consumes one of the peer's credits.
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

// P-RRS: offer the receiver the packed message (or the contiguous user
// buffer) to read; the sender only waits for its Fin.
Status ContextImpl::offerPacked(Peer& peer, SendTransfer& transfer) {
  const wire::Cts& cts = transfer.cts;
  Operation& op = *transfer.op;
  wire::Packed packed{cts.receiverTransfer, 0, 0, static_cast<uint64_t>(cts.bytes), 0};
  if (op.stats.contiguous) {  // nothing to pack: the receiver reads the user buffer
    IBDT_ASSIGN_OR_RETURN(transfer.userRegistration,
                          registerUser(op, cts.bytes, fabric::kLocalWrite | fabric::kRemoteRead, true));
    packed.address = transfer.userRegistration.firstAddress();
    packed.rkey = transfer.userRegistration.front().rkey();
  } else {
    IBDT_ASSIGN_OR_RETURN(transfer.packed, pooledBuffer(static_cast<size_t>(cts.bytes)));
    IBDT_RETURN_IF_ERROR(op.segment->pack(op.sendBuffer, 0, cts.bytes, transfer.packed.data()));
    packed.address = transfer.packed.address();
    packed.rkey = transfer.packed.rkey();
  }
  PendingControl message;
  message.bytes.resize(sizeof(wire::Header) + sizeof(packed));
  size_t at = wire::write(message.bytes.data(), 0, wire::Header{wire::Kind::kPacked, {}, 0});
  wire::write(message.bytes.data(), at, packed);
  peer.controlQueue.push_back(std::move(message));
  activePeers_.mark(peer.rank);
  transfer.waitingForFin = true;
  transfer.next = cts.bytes;  // no writes from this side
  return Status::ok();
}

// Multi-W to a non-contiguous receiver: its layout, sent with this reply or
// cached from an earlier one (Section 4.4.2).
Status ContextImpl::adoptRemoteLayout(Peer& peer, SendTransfer& transfer, std::span<const uint8_t> layout) {
  const wire::Cts& cts = transfer.cts;
  auto cached = peer.remoteLayouts.find(cts.typeId);
  if (!layout.empty()) {
    auto type = datatype::deserialize(layout);
    if (!type.isOk()) return unusableLayout(peer, cts, type.status());
    peer.remoteLayouts[cts.typeId] = {cts.typeVersion, *type};
  } else if (cached == peer.remoteLayouts.end() || cached->second.first != cts.typeVersion) {
    return makeError(Code::kProtocol, "rank ", peer.rank, " refers to layout (", cts.typeId, ", ", cts.typeVersion,
                     ") it never sent, for transfer ", cts.senderTransfer);
  } else {
    ++counters_.layoutCacheHits;
  }
  auto segment = datatype::Segment::create(peer.remoteLayouts[cts.typeId].second, cts.count);
  if (!segment.isOk()) return unusableLayout(peer, cts, segment.status());
  transfer.remoteSegment = std::move(segment).value();
  if (transfer.remoteSegment->size() < cts.bytes) {
    return makeError(Code::kProtocol, "rank ", peer.rank, "'s layout holds ", transfer.remoteSegment->size(),
                     " bytes, it accepted ", cts.bytes, " for transfer ", cts.senderTransfer);
  }
  return Status::ok();
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
  transfer.scheme = finalScheme(options_.forcedScheme, transfer.wantsPack, op.stats.contiguous, unpack,
                                static_cast<Scheme>(cts.scheme), cts.receiverContiguous != 0, cost_.rdmaRead);
  ++counters_.schemeCount[static_cast<int>(transfer.scheme)];
  IBDT_LOG(kDebug, "messaging: send of ", cts.bytes, " B to rank ", peer.rank, ": ", schemeName(transfer.scheme),
           " (sender ", transfer.wantsPack ? "packs" : "zero-copy", ", mean block ", op.stats.meanBlock,
           " B; receiver ", unpack ? "unpacks" : "zero-copy", ")");

  switch (transfer.scheme) {
    case Scheme::kGeneric: {
      IBDT_ASSIGN_OR_RETURN(transfer.packed, dedicatedBuffer(static_cast<size_t>(cts.bytes)));
      IBDT_RETURN_IF_ERROR(op.segment->pack(op.sendBuffer, 0, cts.bytes, transfer.packed.data()));
      break;
    }
    case Scheme::kPRrs:
      return offerPacked(peer, transfer);
    case Scheme::kBcSpup:
      break;
    default: {  // kContiguous, kRwgUp, kMultiW write from the user blocks
      IBDT_ASSIGN_OR_RETURN(transfer.userRegistration, registerUser(op, cts.bytes, fabric::kLocalWrite, false));
      if (transfer.scheme == Scheme::kMultiW && !cts.receiverContiguous) {
        IBDT_RETURN_IF_ERROR(adoptRemoteLayout(peer, transfer, layout));
      }
      break;
    }
  }
  peer.activeSends.push_back(transfer.id);
  activePeers_.mark(peer.rank);
  return advanceSend(peer, transfer);
}

Status ContextImpl::advanceSend(Peer& peer, SendTransfer& transfer) {
  Operation& op = *transfer.op;
  const wire::Cts& cts = transfer.cts;
  const int64_t bytes = cts.bytes;
  const bool unpack = cts.mode == wire::ReplyMode::kUnpack;
  const uint64_t userBase = reinterpret_cast<uint64_t>(op.sendBuffer);
  const int64_t maxWr = static_cast<int64_t>(maxWrBytes_);
  uint32_t room = sendQueueDepth_ - std::min(sendQueueDepth_, peer.sendOutstanding);
  // Scratch kept across calls; sized once so requests may point into sges.
  std::vector<fabric::SendRequest>& requests = scratch_.requests;
  std::vector<fabric::Sge>& sges = scratch_.sges;
  std::vector<datatype::Iovec>& iovecs = scratch_.iovecs;
  requests.clear();
  sges.clear();
  requests.reserve(sendQueueDepth_);
  sges.reserve(static_cast<size_t>(sendQueueDepth_) * maxSge_);
  iovecs.resize(maxSge_);

  while (transfer.next < bytes) {
    // listPost off: one post per write (the paper's "single post many times").
    if (requests.size() == room || (!options_.listPost && !requests.empty())) {
      IBDT_RETURN_IF_ERROR(post(peer, requests));
      room = sendQueueDepth_ - std::min(sendQueueDepth_, peer.sendOutstanding);
      sges.clear();
      if (room == 0) break;
    }
    const int64_t p = transfer.next;
    // Unpack schemes signal each segment; zero-copy ones only the end.
    int64_t signalAt = bytes;
    if (unpack) signalAt = std::min(bytes, (p / cts.segmentSize + 1) * cts.segmentSize);
    int64_t q = std::min(signalAt, p + maxWr);
    uint64_t remote = cts.remoteAddress + static_cast<uint64_t>(p);
    if (unpack && cts.ringSegments != 0) {
      // Segment s goes to ring slot s mod ringSegments once the receiver freed it.
      auto segment = static_cast<uint64_t>(p / cts.segmentSize);
      if (segment >= transfer.released + cts.ringSegments) break;
      remote = cts.remoteAddress + (segment % cts.ringSegments) * static_cast<uint64_t>(cts.segmentSize) +
               static_cast<uint64_t>(p % cts.segmentSize);
    }
    size_t sgeStart = sges.size();
    Staging staging;
    switch (transfer.scheme) {
      case Scheme::kGeneric:
        sges.push_back({transfer.packed.address() + static_cast<uint64_t>(p), static_cast<uint32_t>(q - p),
                        transfer.packed.lkey()});
        break;
      case Scheme::kBcSpup: {
        if (q == signalAt && credits_.available(peer.rank) == 0) goto blocked;
        IBDT_ASSIGN_OR_RETURN(staging, pooledBuffer(static_cast<size_t>(q - p)));
        IBDT_RETURN_IF_ERROR(op.segment->pack(op.sendBuffer, p, q, staging.data()));
        sges.push_back({staging.address(), static_cast<uint32_t>(q - p), staging.lkey()});
        break;
      }
      case Scheme::kMultiW:
        if (!cts.receiverContiguous) {
          datatype::Iovec block{};
          IBDT_ASSIGN_OR_RETURN(auto fill, transfer.remoteSegment->iovecs(cts.baseAddress, p, bytes, &block, 1));
          if (fill.entries != 1) return makeError(Code::kInternal, "receiver layout ends at ", p);
          remote = block.address;
          q = std::min<int64_t>(q, p + static_cast<int64_t>(block.length));
        }
        [[fallthrough]];
      default: {  // gather the user blocks of [p, q)
        IBDT_ASSIGN_OR_RETURN(auto fill, op.segment->iovecs(userBase, p, q, iovecs.data(), maxSge_));
        for (size_t i = 0; i < fill.entries; ++i) {
          sges.push_back({iovecs[i].address, static_cast<uint32_t>(iovecs[i].length),
                          transfer.userRegistration.lkey(iovecs[i].address, iovecs[i].length)});
        }
        q = p + fill.bytes;
        break;
      }
    }
    {
      bool imm = q == signalAt;
      if (imm && credits_.available(peer.rank) == 0) {
        sges.resize(sgeStart);
        goto blocked;
      }
      fabric::SendRequest request;
      request.id = wrId(WrKind::kSendData, transfer.id);
      request.opcode = imm ? fabric::Opcode::kWriteWithImm : fabric::Opcode::kWrite;
      request.flags = fabric::kSignaled;
      request.sgList = sges.data() + sgeStart;
      request.numSge = static_cast<uint32_t>(sges.size() - sgeStart);
      request.immData = imm ? cts.receiverTransfer : 0;
      request.remoteAddress = remote;
      request.rkey = cts.rkey;
      requests.push_back(request);
      if (imm) credits_.spend(peer.rank);
      ++transfer.posted;
      if (staging) transfer.inFlight.emplace_back(transfer.posted, std::move(staging));
      transfer.next = q;
    }
  }
blocked:
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
