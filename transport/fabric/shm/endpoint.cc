#include "transport/fabric/shm/endpoint.h"

#include <unistd.h>

#include <cstring>

#include "base/log.h"
#include "transport/fabric/shm/completion_queue.h"
#include "transport/fabric/shm/domain.h"

namespace ibdt::fabric::shm {
namespace {

// The endpoint address exchanged through the bootstrap (same host, so
// native byte order).
struct AddressBlob {
  uint32_t magic;
  uint32_t version;
  uint32_t pid;
  uint32_t endpointId;
  int32_t domainFd;
  int32_t endpointFd;
  uint64_t domainInode;
  uint64_t endpointInode;
};

bool isReceiveOpcode(Opcode opcode) { return opcode == Opcode::kRecv || opcode == Opcode::kRecvWriteWithImm; }

}  // namespace

ShmEndpoint::Work ShmEndpoint::Pending::work() const {
  return Work{request, sges, inlineData, length};
}

ShmEndpoint::ShmEndpoint(std::shared_ptr<DomainState> state, ShmCompletionQueue& sendQueue,
                         ShmCompletionQueue& recvQueue)
    : domain_(std::move(state)), sendQueue_(&sendQueue), recvQueue_(&recvQueue) {}

Result<std::unique_ptr<Endpoint>> ShmEndpoint::create(std::shared_ptr<DomainState> state,
                                                      ShmCompletionQueue& sendQueue, ShmCompletionQueue& recvQueue,
                                                      const EndpointOptions& options) {
  const Caps& caps = state->caps();
  uint32_t maxSendSge = options.maxSendSge == 0 ? caps.maxSendSge : options.maxSendSge;
  uint32_t maxRecvSge = options.maxRecvSge == 0 ? caps.maxRecvSge : options.maxRecvSge;
  if (options.sendQueueDepth == 0 || options.sendQueueDepth > caps.maxSendQueueDepth ||
      options.recvQueueDepth == 0 || options.recvQueueDepth > caps.maxRecvQueueDepth ||
      maxSendSge > caps.maxSendSge || maxRecvSge > caps.maxRecvSge || options.maxInline > caps.maxInline) {
    return makeError(Code::kInvalidArgument, "shm endpoint options exceed caps: send depth ", options.sendQueueDepth,
                     " (max ", caps.maxSendQueueDepth, "), recv depth ", options.recvQueueDepth, " (max ",
                     caps.maxRecvQueueDepth, "), send sge ", maxSendSge, "/", caps.maxSendSge, ", recv sge ",
                     maxRecvSge, "/", caps.maxRecvSge, ", inline ", options.maxInline, "/", caps.maxInline);
  }
  std::unique_ptr<ShmEndpoint> endpoint(new ShmEndpoint(std::move(state), sendQueue, recvQueue));
  endpoint->id_ = endpoint->domain_->nextEndpointId();
  endpoint->sendDepth_ = options.sendQueueDepth;
  endpoint->recvDepth_ = options.recvQueueDepth;
  endpoint->maxSendSge_ = maxSendSge;
  endpoint->maxRecvSge_ = maxRecvSge;
  endpoint->maxInline_ = options.maxInline;

  size_t slotSize = recvSlotSize(maxRecvSge);
  size_t recvOffset = roundUp(sizeof(EndpointHeader), kCacheLine);
  size_t notifyOffset = roundUp(recvOffset + slotSize * options.recvQueueDepth, kCacheLine);
  uint32_t notifyCapacity = options.recvQueueDepth + 1;
  size_t bounceOffset = roundUp(notifyOffset + sizeof(NotificationSlot) * notifyCapacity, kCacheLine);
  size_t total = bounceOffset + kBounceSize;
  IBDT_ASSIGN_OR_RETURN(endpoint->segment_,
                        SharedRegion::create(strCat(endpoint->domain_->jobTag(), "-endpoint"), total));
  auto* header = new (endpoint->segment_.data()) EndpointHeader();
  header->magic = kEndpointMagic;
  header->version = kLayoutVersion;
  header->pid = static_cast<uint32_t>(getpid());
  header->endpointId = endpoint->id_;
  header->recvDepth = options.recvQueueDepth;
  header->recvSlotSize = static_cast<uint32_t>(slotSize);
  endpoint->recvSlotSize_ = static_cast<uint32_t>(slotSize);
  header->sendDoorbell = sendQueue.doorbell();
  header->recvDoorbell = recvQueue.doorbell();
  header->recvRingOffset = recvOffset;
  header->notifyRingOffset = notifyOffset;
  header->notifyCapacity = notifyCapacity;
  header->bounceSize = static_cast<uint32_t>(kBounceSize);
  header->bounceOffset = bounceOffset;
  endpoint->activitySlot_ = endpoint->domain_->activity().add(endpoint.get());
  header->activitySlot = endpoint->activitySlot_;
  endpoint->header_ = header;
  endpoint->recvPosted_.reset(0, options.recvQueueDepth);
  endpoint->ownRecvSges_.resize(size_t{options.recvQueueDepth} * maxRecvSge);
  endpoint->ownRecvCounts_.resize(options.recvQueueDepth);
  endpoint->notifyTaken_.reset(0, notifyCapacity);
  endpoint->recvSlots_ = endpoint->segment_.data() + recvOffset;
  endpoint->notifications_ = reinterpret_cast<NotificationSlot*>(endpoint->segment_.data() + notifyOffset);
  endpoint->bounce_ = endpoint->segment_.data() + bounceOffset;
  sendQueue.attach(endpoint.get());
  recvQueue.attach(endpoint.get());
  return std::unique_ptr<Endpoint>(std::move(endpoint));
}

ShmEndpoint::~ShmEndpoint() {
  header_->phase.store(static_cast<uint32_t>(EndpointPhase::kClosed), std::memory_order_release);
  if (peer_ != nullptr) {
    peer_->ring(peerRecvDoorbell_);
    peer_->ring(peerSendDoorbell_);
  }
  if (sendQueue_ != nullptr) sendQueue_->detach(this);
  if (recvQueue_ != nullptr) recvQueue_->detach(this);
  domain_->activity().remove(this, activitySlot_);
}

void ShmEndpoint::setPolledDirectly(bool on, std::chrono::steady_clock::time_point now) {
  header_->polledDirectly.store(on ? 1 : 0, std::memory_order_relaxed);
  if (on) return;  // a peer that misses it sets the bit: a visit too many
  // Dekker with pushNotification: either the peer sees 0 and sets the bit,
  // or this drain sees its notification.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  progress(now);
}

void ShmEndpoint::forgetQueue(ShmCompletionQueue* queue) {
  if (sendQueue_ == queue) sendQueue_ = nullptr;
  if (recvQueue_ == queue) recvQueue_ = nullptr;
}

std::vector<uint8_t> ShmEndpoint::address() const {
  AddressBlob blob{kEndpointMagic,
                   kLayoutVersion,
                   static_cast<uint32_t>(domain_->pid()),
                   id_,
                   domain_->segmentFd(),
                   segment_.fd(),
                   domain_->segmentInode(),
                   segment_.inode()};
  std::vector<uint8_t> bytes(sizeof blob);
  std::memcpy(bytes.data(), &blob, sizeof blob);
  return bytes;
}

Status ShmEndpoint::connect(std::span<const uint8_t> peerAddress) {
  if (state_ != EndpointState::kCreated) {
    return makeError(Code::kState, "shm endpoint ", id_, ": connect() on an endpoint that is already ",
                     state_ == EndpointState::kConnected ? "connected" : "in the error state");
  }
  AddressBlob blob{};
  if (peerAddress.size() != sizeof blob) {
    return makeError(Code::kProtocol, "shm endpoint: peer address of ", peerAddress.size(), " bytes, expected ",
                     sizeof blob, " (not an shm address?)");
  }
  std::memcpy(&blob, peerAddress.data(), sizeof blob);
  if (blob.magic != kEndpointMagic || blob.version != kLayoutVersion) {
    return makeError(Code::kProtocol, "shm endpoint: peer address has magic 0x", std::hex, blob.magic,
                     " version ", std::dec, blob.version, " (expected an shm address of layout version ",
                     kLayoutVersion, ")");
  }
  auto peer = domain_->peer(static_cast<pid_t>(blob.pid), blob.domainFd, blob.domainInode);
  if (!peer.isOk()) return std::move(peer).takeStatus().withContext(strCat("connecting to ", peerLabel()));
  auto segment = SharedRegion::openPeer(static_cast<pid_t>(blob.pid), blob.endpointFd, blob.endpointInode);
  if (!segment.isOk()) return std::move(segment).takeStatus().withContext(strCat("connecting to ", peerLabel()));
  auto* header = reinterpret_cast<EndpointHeader*>(segment->data());
  size_t length = segment->length();
  if (length < sizeof(EndpointHeader)) {
    return makeError(Code::kProtocol, "shm endpoint: the endpoint segment of ", peerLabel(), " (process ", blob.pid,
                     ") is too small");
  }
  // Each field read once, checked and kept: the peer can rewrite its header
  // while we read it, and later.
  const uint32_t magic = readOnce(header->magic), version = readOnce(header->version);
  const uint32_t recvDepth = readOnce(header->recvDepth), slotSize = readOnce(header->recvSlotSize);
  const uint32_t notifyCapacity = readOnce(header->notifyCapacity), bounceSize = readOnce(header->bounceSize);
  const uint64_t recvRingOffset = readOnce(header->recvRingOffset);
  const uint64_t notifyRingOffset = readOnce(header->notifyRingOffset);
  const uint64_t bounceOffset = readOnce(header->bounceOffset);
  bool sane = magic == kEndpointMagic && version == kLayoutVersion && recvDepth > 0 &&
              slotSize >= recvSlotSize(1) && slotSize <= recvSlotSize(kMaxSge) &&
              recvRingOffset <= length && uint64_t{slotSize} * recvDepth <= length - recvRingOffset &&
              notifyCapacity == uint64_t{recvDepth} + 1 && notifyRingOffset <= length &&
              sizeof(NotificationSlot) * uint64_t{notifyCapacity} <= length - notifyRingOffset &&
              bounceSize > 0 && bounceOffset <= length && bounceSize <= length - bounceOffset;
  if (!sane) {
    return makeError(Code::kProtocol, "shm endpoint: the endpoint segment of ", peerLabel(), " (process ", blob.pid,
                     ") has an unexpected layout");
  }
  peer_ = std::move(peer).value();
  peerSegment_ = std::move(segment).value();
  peerHeader_ = header;
  peerRecvDoorbell_ = readOnce(header->recvDoorbell);  // bounds-checked by the peer domain on use
  peerSendDoorbell_ = readOnce(header->sendDoorbell);
  peerRecvDepth_ = recvDepth;
  peerRecvSlotSize_ = slotSize;
  peerNotifyCapacity_ = notifyCapacity;
  peerBounceSize_ = bounceSize;
  peerActivitySlot_ = readOnce(header->activitySlot);  // bounds-checked by the peer domain on use
  peerRecvSlots_ = peerSegment_.data() + recvRingOffset;
  peerNotifications_ = reinterpret_cast<NotificationSlot*>(peerSegment_.data() + notifyRingOffset);
  peerBounce_ = peerSegment_.data() + bounceOffset;
  peerRecvTaken_.reset(header->recvRing.tail.load(std::memory_order_relaxed), peerRecvDepth_);
  peerNotifyPut_.reset(header->notifyRing.head.load(std::memory_order_relaxed), peerNotifyCapacity_);
  state_ = EndpointState::kConnected;
  header_->phase.store(static_cast<uint32_t>(EndpointPhase::kConnected), std::memory_order_release);
  lastPeerCheck_ = std::chrono::steady_clock::now();
  // The peer may have pushed notifications before we could drain them (its
  // bit was consumed while we were not connected): visit us once more.
  domain_->activity().markActive(activitySlot_);
  return Status::ok();
}

Status ShmEndpoint::validate(const SendRequest& request, uint64_t& length) const {
  if (isReceiveOpcode(request.opcode) || static_cast<uint8_t>(request.opcode) > static_cast<uint8_t>(Opcode::kRead)) {
    return makeError(Code::kInvalidArgument, "shm endpoint ", id_, ": opcode ", static_cast<int>(request.opcode),
                     " cannot be posted to a send queue");
  }
  if (request.numSge > maxSendSge_ || (request.numSge > 0 && request.sgList == nullptr)) {
    return makeError(Code::kInvalidArgument, "shm endpoint ", id_, ": ", request.numSge,
                     " scatter/gather entries (max ", maxSendSge_, ")", request.sgList == nullptr ? " and no list" : "");
  }
  length = 0;
  for (uint32_t i = 0; i < request.numSge; ++i) length += request.sgList[i].length;
  if (length > domain_->caps().maxMessageSize) {
    return makeError(Code::kInvalidArgument, "shm endpoint ", id_, ": request of ", length,
                     " bytes exceeds the maximum message size ", domain_->caps().maxMessageSize);
  }
  if ((request.flags & kInline) != 0 && length > maxInline_) {
    return makeError(Code::kInvalidArgument, "shm endpoint ", id_, ": inline request of ", length,
                     " bytes exceeds maxInline ", maxInline_);
  }
  if ((request.flags & kInline) != 0 && request.opcode == Opcode::kRead) {
    return makeError(Code::kInvalidArgument, "shm endpoint ", id_, ": an RDMA READ cannot be inline");
  }
  return Status::ok();
}

Status ShmEndpoint::postSend(const SendRequest& first, const SendRequest** badRequest) {
  for (const SendRequest* request = &first; request != nullptr; request = request->next) {
    if (request->opcode == Opcode::kWrite && request->next != nullptr) {
      request = writeBatch(request);  // a run of writes in one system call
      if (request == nullptr) break;
    }
    uint64_t length = 0;
    Status status = validate(*request, length);
    if (status.isOk() && state_ == EndpointState::kCreated) {
      status = makeError(Code::kState, "shm endpoint ", id_, ": postSend before connect()");
    }
    if (status.isOk() && sendInUse_ >= sendDepth_) {
      status = Status(Code::kAgain, strCat("shm endpoint ", id_, ": send queue full (", sendDepth_, " requests)"));
    }
    if (!status.isOk()) {
      if (badRequest != nullptr) *badRequest = request;
      progressSends();
      return status;
    }
    ++sendInUse_;
    Work work{*request, std::span<const Sge>(request->sgList, request->numSge), {}, length};
    if (state_ == EndpointState::kError) {
      finish(work, flushStatus());
      continue;
    }
    CompletionStatus outcome = CompletionStatus::kSuccess;
    if (pending_.empty() && execute(work, outcome) == Step::kDone) {
      finish(work, outcome);  // fast path: nothing queued before it, executed now
      continue;
    }
    // Keep a copy; inline payloads are copied now since the caller may reuse them.
    if (pending_.empty()) domain_->activity().markBusy(this);  // progress retries it
    Pending& stored = pending_.emplace_back();
    stored.request = *request;
    stored.request.next = nullptr;
    stored.sges.assign(request->sgList, request->sgList + request->numSge);
    stored.length = length;
    if ((request->flags & kInline) != 0) {
      stored.inlineData.resize(length);
      uint8_t* at = stored.inlineData.data();
      for (const Sge& sge : stored.sges) {
        std::memcpy(at, reinterpret_cast<const void*>(sge.address), sge.length);
        at += sge.length;
      }
    }
  }
  return Status::ok();
}

Status ShmEndpoint::postRecv(const RecvRequest& first, const RecvRequest** badRequest) {
  bool posted = false;
  for (const RecvRequest* request = &first; request != nullptr; request = request->next) {
    Status status;
    if (request->numSge > maxRecvSge_ || (request->numSge > 0 && request->sgList == nullptr)) {
      status = makeError(Code::kInvalidArgument, "shm endpoint ", id_, ": receive with ", request->numSge,
                         " scatter/gather entries (max ", maxRecvSge_, ")");
    } else if (postedRecvs_.size() >= recvDepth_) {
      status = Status(Code::kAgain, strCat("shm endpoint ", id_, ": receive queue full (", recvDepth_, ")"));
    }
    if (!status.isOk()) {
      if (badRequest != nullptr) *badRequest = request;
      if (posted && peer_ != nullptr) peer_->ring(peerSendDoorbell_);
      return status;
    }
    Completion completion;
    completion.id = request->id;
    completion.opcode = Opcode::kRecv;
    completion.endpointId = id_;
    if (state_ == EndpointState::kError) {
      completion.status = flushStatus();
      pushRecv(completion);
      continue;
    }
    auto* slot = reinterpret_cast<RecvSlot*>(recvSlots_ + size_t{recvPosted_.slot} * recvSlotSize_);
    RecvSge* own = &ownRecvSges_[size_t{recvPosted_.slot} * maxRecvSge_];
    bool valid = true;
    for (uint32_t i = 0; i < request->numSge && valid; ++i) {
      const Sge& sge = request->sgList[i];
      uint32_t regionIndex = 0;
      valid = sge.length == 0 || domain_->checkLocal(sge, kLocalWrite, &regionIndex);
      own[i] = RecvSge{sge.address, sge.length, regionIndex};
      slot->sge[i] = own[i];
    }
    ownRecvCounts_[recvPosted_.slot] = request->numSge;
    if (!valid) {
      completion.status = CompletionStatus::kLocalProtection;
      pushRecv(completion);
      fail(CompletionStatus::kFlushed);
      continue;
    }
    slot->numSge = request->numSge;
    recvPosted_.advance();
    header_->recvRing.head.store(recvPosted_.index, std::memory_order_release);
    postedRecvs_.push_back(request->id);
    posted = true;
  }
  // A peer's send may be waiting for this receive.
  if (posted && peer_ != nullptr) peer_->ring(peerSendDoorbell_);
  return Status::ok();
}

void ShmEndpoint::finish(const Work& work, CompletionStatus status) {
  bounceChunk_ = 0;
  bounceDone_ = 0;
  if (status == CompletionStatus::kSuccess && (work.request.flags & kSignaled) == 0) {
    --sendInUse_;
  } else {
    Completion completion;
    completion.id = work.request.id;
    completion.opcode = work.request.opcode;
    completion.status = status;
    completion.byteLength = static_cast<uint32_t>(work.length);
    completion.endpointId = id_;
    completion.vendorError = status == CompletionStatus::kSuccess ? 0 : vendorError_;
    pushSend(completion);
  }
  vendorError_ = 0;
  if (status != CompletionStatus::kSuccess && status != CompletionStatus::kFlushed &&
      state_ != EndpointState::kError) {
    IBDT_LOG(kDebug, "shm endpoint ", id_, " to ", peerLabel(), ": request ", work.request.id, " failed with ",
             completionStatusName(status), "; endpoint moves to the error state");
    fail(CompletionStatus::kFlushed);
  }
}

void ShmEndpoint::progressSends() {
  while (!pending_.empty() && state_ == EndpointState::kConnected) {
    Work work = pending_.front().work();
    CompletionStatus status = CompletionStatus::kSuccess;
    if (execute(work, status) == Step::kBlocked) return;
    Pending done = std::move(pending_.front());
    pending_.pop_front();
    finish(done.work(), status);
  }
}

bool ShmEndpoint::drainNotifications() {
  const uint64_t first = notifyTaken_.index;
  bool ok = true;
  for (;; notifyTaken_.advance()) {
    const NotificationSlot& slot = notifications_[notifyTaken_.slot];
    if (slot.sequence.load(std::memory_order_acquire) != notifyTaken_.index + 1) break;
    const Notification note = slot.note;  // one read of what the peer wrote
    if (note.kind != static_cast<uint8_t>(NotificationKind::kReceiveDone)) {
      if (peer_ != nullptr) serveBounce(note);
      continue;
    }
    if (postedRecvs_.empty()) continue;  // flushed already (we are in the error state)
    if (note.byteLength > 0) prefetchReceived(postedRecvs_.size(), note.byteLength);
    Completion completion;
    completion.id = postedRecvs_.front();
    postedRecvs_.pop_front();
    completion.opcode = static_cast<Opcode>(note.opcode);
    completion.status = static_cast<CompletionStatus>(note.status);
    completion.byteLength = note.byteLength;
    completion.hasImm = note.hasImm != 0;
    completion.immData = note.immData;
    completion.endpointId = id_;
    if (!isReceiveOpcode(completion.opcode) || note.status > static_cast<uint8_t>(CompletionStatus::kFatal)) {
      completion.opcode = Opcode::kRecv;
      completion.status = CompletionStatus::kFatal;  // corrupt notification
    }
    ok = ok && completion.status == CompletionStatus::kSuccess;
    pushRecv(completion);
  }
  if (notifyTaken_.index != first) header_->notifyRing.tail.store(notifyTaken_.index, std::memory_order_release);
  return ok;
}

void ShmEndpoint::prefetchReceived(size_t outstanding, uint32_t byteLength) const {
  // The oldest posted receive is the one completed: its ring entry is
  // `outstanding` below the head. The peer can write the entry, but a
  // prefetch of a bad address is dropped, never a fault.
  const auto* slot =
      reinterpret_cast<const RecvSlot*>(recvSlots_ + size_t{recvPosted_.slotBefore(outstanding)} * recvSlotSize_);
  uint64_t left = std::min<uint64_t>(byteLength, kPrefetchBytes);
  uint32_t count = std::min<uint32_t>(slot->numSge, maxRecvSge_);
  for (uint32_t i = 0; i < count && left > 0; ++i) {
    uint64_t address = slot->sge[i].address;
    uint64_t take = std::min<uint64_t>(left, slot->sge[i].length);
    for (uint64_t line = address & ~uint64_t{kCacheLine - 1}; line < address + take; line += kCacheLine) {
      __builtin_prefetch(reinterpret_cast<const void*>(line), 0, 3);
    }
    left -= take;
  }
}

void ShmEndpoint::checkPeer(std::chrono::steady_clock::time_point now) {
  if (now - lastPeerCheck_ < domain_->livenessInterval()) return;
  lastPeerCheck_ = now;
  bool closed = peerHeader_->phase.load(std::memory_order_acquire) == static_cast<uint32_t>(EndpointPhase::kClosed);
  if (closed || !peer_->alive()) {
    IBDT_LOG(kInfo, "shm endpoint ", id_, ": ", peerLabel(), " (process ", peer_->pid(), ") ",
             closed ? "closed its endpoint" : "died", "; failing outstanding requests");
    fail(CompletionStatus::kRetryExceeded);
  }
}

void ShmEndpoint::progress(std::chrono::steady_clock::time_point now) {
  if (state_ != EndpointState::kConnected) return;
  if (!drainNotifications()) {
    fail(CompletionStatus::kFlushed);
    return;
  }
  progressSends();
  if (state_ == EndpointState::kConnected) checkPeer(now);
}

CompletionStatus ShmEndpoint::flushStatus() {
  if (lossUnreported_) {
    lossUnreported_ = false;
    return CompletionStatus::kRetryExceeded;
  }
  return CompletionStatus::kFlushed;
}

void ShmEndpoint::fail(CompletionStatus cause) {
  if (state_ == EndpointState::kError) return;
  if (state_ == EndpointState::kConnected) drainNotifications();  // deliver what already arrived
  state_ = EndpointState::kError;
  header_->phase.store(static_cast<uint32_t>(EndpointPhase::kError), std::memory_order_release);
  lossUnreported_ = cause == CompletionStatus::kRetryExceeded;
  while (!pending_.empty()) {
    Pending done = std::move(pending_.front());
    pending_.pop_front();
    finish(done.work(), flushStatus());
  }
  while (!postedRecvs_.empty()) {
    Completion completion;
    completion.id = postedRecvs_.front();
    postedRecvs_.pop_front();
    completion.opcode = Opcode::kRecv;
    completion.status = flushStatus();
    completion.endpointId = id_;
    pushRecv(completion);
  }
  if (peer_ != nullptr) {
    peer_->ring(peerRecvDoorbell_);
    peer_->ring(peerSendDoorbell_);
  }
}

void ShmEndpoint::pushSend(const Completion& completion) {
  if (sendQueue_ != nullptr) sendQueue_->push(completion);
}

void ShmEndpoint::pushRecv(const Completion& completion) {
  if (recvQueue_ != nullptr) recvQueue_->push(completion);
}

void ShmEndpoint::completionPolled(const Completion& completion) {
  if (!isReceiveOpcode(completion.opcode) && sendInUse_ > 0) --sendInUse_;
}

}  // namespace ibdt::fabric::shm
