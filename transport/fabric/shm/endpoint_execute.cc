// How an shm endpoint carries out one send-queue request: checks, the copy
// (memcpy into a mapped segment, cross-memory attach, or the bounce path),
// and the notification that completes a receive at the peer.
#include <cerrno>
#include <cstring>

#include "transport/fabric/shm/domain.h"
#include "transport/fabric/shm/endpoint.h"
#include "transport/fabric/shm/remote_copy.h"

namespace ibdt::fabric::shm {
namespace {

bool hasImm(Opcode opcode) { return opcode == Opcode::kSendWithImm || opcode == Opcode::kWriteWithImm; }

}  // namespace

const SendRequest* ShmEndpoint::writeBatch(const SendRequest* first) {
  if (!pending_.empty() || state_ != EndpointState::kConnected || !crossMemoryAttach()) return first;
  EndpointPhase peerPhase = static_cast<EndpointPhase>(peerHeader_->phase.load(std::memory_order_acquire));
  if (peerPhase == EndpointPhase::kError || peerPhase == EndpointPhase::kClosed) return first;
  // Collect consecutive plain writes to the peer's user memory that would
  // succeed on their own; anything else ends the run.
  thread_local std::vector<iovec> local;
  thread_local std::vector<RemotePiece> remote;
  local.clear();
  remote.clear();
  const SendRequest* end = first;
  uint32_t count = 0;
  for (; end != nullptr && end->opcode == Opcode::kWrite && sendInUse_ + count < sendDepth_; end = end->next) {
    uint64_t length = 0;
    if (!validate(*end, length).isOk() || length == 0) break;
    size_t localMark = local.size();
    bool usable = true;
    for (uint32_t i = 0; i < end->numSge && usable; ++i) {
      const Sge& sge = end->sgList[i];
      if (sge.length == 0) continue;
      usable = domain_->checkLocal(sge, 0);
      local.push_back({reinterpret_cast<void*>(sge.address), sge.length});
    }
    RemotePiece piece;
    if (usable) {
      usable = peer_->checkAccess(end->rkey, end->remoteAddress, length, kRemoteWrite, piece) ==
                   CompletionStatus::kSuccess &&
               piece.mapped == nullptr;
    }
    if (!usable) {
      local.resize(localMark);
      break;
    }
    remote.push_back(piece);
    ++count;
  }
  if (count < 2) return first;
  if (copyRemote(Direction::kToPeer, peer_->pid(), local, remote).status != CompletionStatus::kSuccess) {
    return first;  // redo one by one, which names the failing request (writes are idempotent)
  }
  for (const SendRequest* done = first; done != end; done = done->next) {
    ++sendInUse_;
    uint64_t length = 0;
    for (uint32_t i = 0; i < done->numSge; ++i) length += done->sgList[i].length;
    finish(Work{*done, std::span<const Sge>(done->sgList, done->numSge), {}, length}, CompletionStatus::kSuccess);
  }
  return end;
}


ShmEndpoint::Step ShmEndpoint::execute(const Work& work, CompletionStatus& status) {
  EndpointPhase peerPhase = static_cast<EndpointPhase>(peerHeader_->phase.load(std::memory_order_acquire));
  if (peerPhase == EndpointPhase::kError || peerPhase == EndpointPhase::kClosed) {
    status = CompletionStatus::kRetryExceeded;  // the peer endpoint no longer answers
    return Step::kDone;
  }
  iovec local[kMaxSge];
  size_t count = 0;
  if (!work.inlineData.empty()) {
    local[count++] = {const_cast<uint8_t*>(work.inlineData.data()), work.inlineData.size()};
  } else {
    uint32_t access = work.request.opcode == Opcode::kRead ? uint32_t{kLocalWrite} : 0u;
    bool inlined = (work.request.flags & kInline) != 0;  // as in verbs, inline data needs no lkey
    if (!inlined && !domain_->checkLocal(work.sges, access)) {
      status = CompletionStatus::kLocalProtection;
      return Step::kDone;
    }
    for (const Sge& sge : work.sges) {
      if (sge.length != 0) local[count++] = {reinterpret_cast<void*>(sge.address), sge.length};
    }
  }
  std::span<const iovec> iovs(local, count);
  if (work.request.opcode == Opcode::kSend || work.request.opcode == Opcode::kSendWithImm) {
    return executeSend(work, iovs, status);
  }
  return executeOneSided(work, iovs, status);
}

bool ShmEndpoint::peerReceiveAvailable() {
  // The peer wrote its head when it last posted, so reading it is a cache
  // miss: read it again only once the receives seen last time are used up.
  // The acquire of that read covers every receive slot below it.
  uint64_t tail = peerRecvTaken_.index;
  if (peerRecvHead_ != tail) return true;
  peerRecvHead_ = peerHeader_->recvRing.head.load(std::memory_order_acquire);
  return peerRecvHead_ != tail;
}

ShmEndpoint::Step ShmEndpoint::executeSend(const Work& work, std::span<const iovec> local, CompletionStatus& status) {
  if (!peerReceiveAvailable()) return Step::kBlocked;
  const auto* slot =
      reinterpret_cast<const RecvSlot*>(peerRecvSlots_ + size_t{peerRecvTaken_.slot} * peerRecvSlotSize_);
  uint32_t numSge = std::min<uint32_t>(slot->numSge, (peerRecvSlotSize_ - offsetof(RecvSlot, sge)) / sizeof(RecvSge));
  uint64_t capacity = 0;
  for (uint32_t i = 0; i < numSge; ++i) capacity += slot->sge[i].length;
  bool imm = hasImm(work.request.opcode);
  if (work.length > capacity) {
    // As on InfiniBand: the receiver sees a local length error, the sender
    // an invalid request; both endpoints fail.
    consumePeerReceive();
    notifyPeer(Opcode::kRecv, CompletionStatus::kLocalLength, 0, imm, work.request.immData);
    status = CompletionStatus::kRemoteInvalidRequest;
    return Step::kDone;
  }
  RemotePiece remote[kMaxSge];
  size_t pieces = 0;
  uint64_t left = work.length;
  bool allMapped = true;
  for (uint32_t i = 0; i < numSge && left > 0; ++i) {
    uint64_t take = std::min<uint64_t>(left, slot->sge[i].length);
    status = peer_->resolveReceive(slot->sge[i].regionIndex, slot->sge[i].address, take, remote[pieces]);
    if (status != CompletionStatus::kSuccess) break;
    allMapped = allMapped && remote[pieces].mapped != nullptr;
    ++pieces;
    left -= take;
  }
  if (status == CompletionStatus::kSuccess) {
    if (!allMapped && !crossMemoryAttach()) {
      // The receiver scatters the payload itself, chunk by chunk.
      if (bounce(NotificationKind::kBounceReceive, local, 0, 0, work.length) == Step::kBlocked) return Step::kBlocked;
    } else {
      CopyOutcome outcome = copyRemote(Direction::kToPeer, peer_->pid(), local, std::span(remote, pieces));
      if (outcome.error == EPERM) {
        peer_->denyCrossMemoryAttach();
        return executeSend(work, local, status);  // again, through the bounce path
      }
      status = outcome.status;
      vendorError_ = static_cast<uint32_t>(outcome.error);
    }
  }
  consumePeerReceive();
  CompletionStatus delivered =
      status == CompletionStatus::kSuccess ? CompletionStatus::kSuccess : CompletionStatus::kRemoteOperation;
  if (status != CompletionStatus::kRetryExceeded) {
    notifyPeer(Opcode::kRecv, delivered, static_cast<uint32_t>(work.length), imm, work.request.immData);
  }
  return Step::kDone;
}

Status ShmEndpoint::postSendPacked(const PackedSend& send) {
  // Not an error: the caller sends through a slot instead, often (a send
  // queue that is not idle), so no message is formatted.
  auto notNow = [](const char* why) { return Status(Code::kAgain, why); };
  if (state_ != EndpointState::kConnected || !pending_.empty() || sendInUse_ >= sendDepth_) {
    return notNow("the send queue is not idle");
  }
  EndpointPhase peerPhase = static_cast<EndpointPhase>(peerHeader_->phase.load(std::memory_order_acquire));
  if (peerPhase == EndpointPhase::kError || peerPhase == EndpointPhase::kClosed) return notNow("the peer is gone");
  if (!peerReceiveAvailable()) return notNow("the peer has no receive posted");
  const auto* slot =
      reinterpret_cast<const RecvSlot*>(peerRecvSlots_ + size_t{peerRecvTaken_.slot} * peerRecvSlotSize_);
  // The peer wrote the slot: read its first entry once, then check it.
  RecvSge first = slot->sge[0];
  RemotePiece piece;
  if (slot->numSge == 0 || first.length < send.length ||
      peer_->resolveReceive(first.regionIndex, first.address, send.length, piece) != CompletionStatus::kSuccess ||
      piece.mapped == nullptr) {
    return notNow("the receive is not one mapped buffer that fits");
  }
  // Written into the peer's memory, but not published: on failure the
  // receive is still the peer's, untouched as far as it can tell.
  IBDT_RETURN_IF_ERROR(send.pack(send.context, piece.mapped));
  consumePeerReceive();
  notifyPeer(Opcode::kRecv, CompletionStatus::kSuccess, send.length, false, 0);
  ++sendInUse_;
  SendRequest request;
  request.id = send.id;
  request.flags = send.flags;
  finish(Work{request, {}, {}, send.length}, CompletionStatus::kSuccess);
  return Status::ok();
}

ShmEndpoint::Step ShmEndpoint::executeOneSided(const Work& work, std::span<const iovec> local,
                                               CompletionStatus& status) {
  Opcode opcode = work.request.opcode;
  if (opcode == Opcode::kWriteWithImm && !peerReceiveAvailable()) return Step::kBlocked;
  if (work.length > 0) {
    RemotePiece remote;
    uint32_t access = opcode == Opcode::kRead ? uint32_t{kRemoteRead} : uint32_t{kRemoteWrite};
    status = peer_->checkAccess(work.request.rkey, work.request.remoteAddress, work.length, access, remote);
    if (status != CompletionStatus::kSuccess) return Step::kDone;
    if (remote.mapped == nullptr && !crossMemoryAttach()) {
      NotificationKind kind = opcode == Opcode::kRead ? NotificationKind::kBounceRead : NotificationKind::kBounceWrite;
      if (bounce(kind, local, work.request.rkey, remote.address, work.length) == Step::kBlocked) return Step::kBlocked;
    } else {
      Direction direction = opcode == Opcode::kRead ? Direction::kFromPeer : Direction::kToPeer;
      CopyOutcome outcome = copyRemote(direction, peer_->pid(), local, std::span(&remote, 1));
      if (outcome.error == EPERM) {
        peer_->denyCrossMemoryAttach();
        return executeOneSided(work, local, status);  // again, through the bounce path
      }
      status = outcome.status;
      vendorError_ = static_cast<uint32_t>(outcome.error);
      if (status != CompletionStatus::kSuccess) return Step::kDone;
    }
  }
  status = CompletionStatus::kSuccess;
  if (opcode == Opcode::kWriteWithImm) {
    consumePeerReceive();
    notifyPeer(Opcode::kRecvWriteWithImm, CompletionStatus::kSuccess, static_cast<uint32_t>(work.length), true,
               work.request.immData);
  }
  return Step::kDone;
}

void ShmEndpoint::consumePeerReceive() {
  peerRecvTaken_.advance();
  peerHeader_->recvRing.tail.store(peerRecvTaken_.index, std::memory_order_release);
  // The next SEND reads the next receive's entry first, a line the peer
  // wrote when it posted that receive (long ago: the ring is deep), so
  // fetching it now takes a cross-core miss off that SEND's path.
  __builtin_prefetch(peerRecvSlots_ + size_t{peerRecvTaken_.slot} * peerRecvSlotSize_);
}

void ShmEndpoint::notifyPeer(Opcode opcode, CompletionStatus status, uint32_t byteLength, bool imm,
                             uint32_t immData) {
  Notification note{};
  note.byteLength = byteLength;
  note.immData = immData;
  note.opcode = static_cast<uint8_t>(opcode);
  note.hasImm = imm ? 1 : 0;
  note.status = static_cast<uint8_t>(status);
  note.kind = static_cast<uint8_t>(NotificationKind::kReceiveDone);
  pushNotification(note);
}

void ShmEndpoint::pushNotification(const Notification& note) {
  // Never full: each notification answers one consumed receive (the peer
  // has at most recvDepth outstanding) or is the one bounce request in flight.
  NotificationSlot& slot = peerNotifications_[peerNotifyPut_.slot];
  slot.note = note;
  peerNotifyPut_.advance();
  slot.sequence.store(peerNotifyPut_.index, std::memory_order_release);
  peerHeader_->notifyRing.head.store(peerNotifyPut_.index, std::memory_order_relaxed);
  // After the entry (its reader clears the bit, then drains), unless the
  // peer polls this ring directly; the fence orders the entry before that
  // read (Dekker with ShmEndpoint::setPolledDirectly).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (peerHeader_->polledDirectly.load(std::memory_order_relaxed) == 0) peer_->markActive(peerActivitySlot_);
  peer_->ring(peerRecvDoorbell_);
}

bool ShmEndpoint::crossMemoryAttach() const {
  return domain_->crossMemoryAttach() && !peer_->crossMemoryAttachDenied();
}

ShmEndpoint::Step ShmEndpoint::bounce(NotificationKind kind, std::span<const iovec> local, uint64_t rkey,
                                      uint64_t remoteAddress, uint64_t total) {
  if (bounceChunk_ != 0) {
    if (header_->bounceAcked.load(std::memory_order_acquire) != bounceIssued_) return Step::kBlocked;
    if (kind == NotificationKind::kBounceRead) scatterToIovecs(local, bounceDone_, bounce_, bounceChunk_);
    bounceDone_ += bounceChunk_;
    bounceChunk_ = 0;
  }
  if (bounceDone_ == total) {
    bounceDone_ = 0;
    return Step::kDone;
  }
  auto chunk = static_cast<uint32_t>(std::min<uint64_t>(kBounceSize, total - bounceDone_));
  if (kind != NotificationKind::kBounceRead) gatherFromIovecs(local, bounceDone_, bounce_, chunk);
  Notification note{};
  note.kind = static_cast<uint8_t>(kind);
  note.chunkLength = chunk;
  note.address = kind == NotificationKind::kBounceReceive ? bounceDone_ : remoteAddress + bounceDone_;
  note.immData = rkeyIndex(rkey);  // the target checks its own table again
  note.byteLength = rkeyGeneration(rkey);
  pushNotification(note);
  ++bounceIssued_;
  bounceChunk_ = chunk;
  return Step::kBlocked;
}

void ShmEndpoint::serveBounce(const Notification& note) {
  auto kind = static_cast<NotificationKind>(note.kind);
  bool valid = note.chunkLength <= peerBounceSize_;
  if (valid && kind == NotificationKind::kBounceReceive) {
    // The initiator has not consumed the receive yet: it is at our tail,
    // which the peer writes, so it must name a receive still posted.
    uint64_t tail = header_->recvRing.tail.load(std::memory_order_relaxed);
    uint64_t head = recvPosted_.index;
    if (tail < head && head - tail <= postedRecvs_.size()) {
      size_t slot = tail % recvDepth_;
      const RecvSge* own = &ownRecvSges_[slot * maxRecvSge_];
      iovec iovs[kMaxSge];
      uint32_t count = ownRecvCounts_[slot];
      for (uint32_t i = 0; i < count; ++i) iovs[i] = {reinterpret_cast<void*>(own[i].address), own[i].length};
      scatterToIovecs(std::span(iovs, count), note.address, peerBounce_, note.chunkLength);
    }
  } else if (valid) {
    uint32_t access = kind == NotificationKind::kBounceRead ? uint32_t{kRemoteRead} : uint32_t{kRemoteWrite};
    uint64_t rkey = makeRkey(note.immData, note.byteLength);
    if (domain_->checkOwnRegion(rkey, note.address, note.chunkLength, access)) {
      auto* mine = reinterpret_cast<uint8_t*>(note.address);
      if (kind == NotificationKind::kBounceWrite) {
        std::memcpy(mine, peerBounce_, note.chunkLength);
      } else {
        std::memcpy(peerBounce_, mine, note.chunkLength);
      }
    }
  }
  peerHeader_->bounceAcked.fetch_add(1, std::memory_order_release);
  peer_->ring(peerSendDoorbell_);
}

}  // namespace ibdt::fabric::shm
