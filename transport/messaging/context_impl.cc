// Context set-up, completion dispatch and matching.
#include "transport/messaging/context_impl.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "base/config.h"
#include "base/log.h"

namespace ibdt::messaging {
namespace {

constexpr uint32_t kSendSlotsMin = 64;

Status completionFailure(const fabric::Completion& completion, const Peer& peer, std::string_view what) {
  return fabric::completionError(completion, strCat("rank ", peer.rank)).withContext(what);
}

// Advances each transfer listed in `ids` once; drops the ids whose requests
// are all posted (or whose transfer is gone).
template <typename Transfers, typename Advance, typename AllPosted>
Status advanceListed(std::deque<uint32_t>& ids, Transfers& transfers, Advance&& advance, AllPosted&& allPosted) {
  Status status;
  for (size_t i = 0; status.isOk() && i < ids.size();) {
    auto found = transfers.find(ids[i]);
    bool drop = found == transfers.end();
    if (!drop) {
      status = advance(*found->second);
      drop = allPosted(*found->second);
    }
    if (drop)
      ids.erase(ids.begin() + static_cast<long>(i));
    else
      ++i;
  }
  return status;
}

// A field of a control message from `peer`; a message too short for it is
// that peer's fault, so the error names it.
template <typename T>
Result<T> readFrom(const Peer& peer, std::span<const uint8_t> message, size_t offset) {
  auto value = wire::read<T>(message, offset);
  if (!value.isOk()) return std::move(value).takeStatus().withContext(strCat("rank ", peer.rank));
  return value;
}

}  // namespace

Status ContextImpl::init(const Bootstrap& bootstrap) {
  rank_ = bootstrap.rank;
  size_ = bootstrap.size;
  IBDT_RETURN_IF_ERROR(checkSetup(bootstrap));
  chooseSpins(bootstrap);
  IBDT_RETURN_IF_ERROR(readProviderLimits());
  IBDT_RETURN_IF_ERROR(measureCosts());
  IBDT_RETURN_IF_ERROR(createQueues());
  IBDT_RETURN_IF_ERROR(connectSelf());
  IBDT_RETURN_IF_ERROR(createBuffers());
  return connectPeers(bootstrap);
}

Status ContextImpl::checkSetup(const Bootstrap& bootstrap) const {
  if (size_ < 1 || rank_ < 0 || rank_ >= size_ || !bootstrap.allgather) {
    return makeError(Code::kInvalidArgument, "messaging context: bad bootstrap (rank ", rank_, " of ", size_, ")");
  }
  if (options_.ringSegments < 2) {
    return makeError(Code::kInvalidArgument, "messaging context: a staging ring needs at least 2 segments, not ",
                     options_.ringSegments);
  }
  IBDT_RETURN_IF_ERROR(checkEagerLimit(options_.eagerLimit));
  if (options_.eagerLimit < 0 || options_.eagerCredits < 2 || options_.segmentSize < 0) {
    return makeError(Code::kInvalidArgument, "messaging context: eager limit ", options_.eagerLimit, ", credits ",
                     options_.eagerCredits, " and segment size ", options_.segmentSize,
                     " must be >= 0, >= 2 and >= 0 (0: automatic)");
  }
  return Status::ok();
}

void ContextImpl::chooseSpins(const Bootstrap& bootstrap) {
  // Spin where every rank of this node can own a core. Oversubscribed, a
  // rank that polls in vain holds the core its peer needs: yield at once,
  // as Open MPI's yield_when_idle does (64 pauses made a 4-rank alltoall
  // on 2 cores 3x slower).
  int local = bootstrap.localSize > 0 ? bootstrap.localSize : size_;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (options_.spins >= 0)
    spins_ = static_cast<uint32_t>(options_.spins);
  else
    spins_ = cores > 0 && local <= cores ? 4096 : 0;
}

Status ContextImpl::readProviderLimits() {
  const fabric::Caps& caps = domain_.caps();
  if (caps.provider == "verbs") {
    // Each peer's eager buffers are posted, found and reposted as that
    // peer's: with one shared receive queue a message would land in another
    // peer's buffer and be read from the wrong one (docs/many-ranks.md).
    IBDT_ASSIGN_OR_RETURN(bool shared, config::getBool("IBDT_VERBS_SRQ"));
    if (shared) {
      return makeError(Code::kInvalidArgument,
                       "IBDT_VERBS_SRQ=1: the messaging layer does not support a shared receive queue yet; unset it");
    }
  }
  maxSge_ = std::max<uint32_t>(1, caps.maxSendSge);
  maxWrBytes_ = std::numeric_limits<uint32_t>::max();
  if (caps.maxMessageSize != 0) maxWrBytes_ = std::min<uint64_t>(maxWrBytes_, caps.maxMessageSize);
  sendQueueDepth_ = caps.maxSendQueueDepth != 0 ? std::min<uint32_t>(256, caps.maxSendQueueDepth) : 256;
  recvDepth_ = options_.eagerCredits + CreditFlow::kReserveSlots;
  if (caps.maxRecvQueueDepth != 0 && recvDepth_ > caps.maxRecvQueueDepth) {
    return makeError(Code::kInvalidArgument, "IBDT_MSG_CREDITS ", options_.eagerCredits, " + ",
                     CreditFlow::kReserveSlots, " reserved exceeds the provider's receive queue depth ",
                     caps.maxRecvQueueDepth);
  }
  if (slotSize() > maxWrBytes_) {
    return makeError(Code::kInvalidArgument, "IBDT_MSG_EAGER_LIMIT ", options_.eagerLimit,
                     " exceeds the provider's message size ", caps.maxMessageSize);
  }
  return Status::ok();
}

Status ContextImpl::measureCosts() {
  const fabric::Caps& caps = domain_.caps();
  cost_.memcpyBytesPerNs = measureMemcpyBytesPerNs();
  cost_.transfer = caps.transfer;
  cost_.rdmaRead = caps.rdmaRead;
  cost_.pageSize = caps.pageSize;
  cost_.maxSge = maxSge_;
  cost_.listLength = options_.listPost ? sendQueueDepth_ : 1;
  IBDT_RETURN_IF_ERROR(measureBlockCosts(cost_));
  packBelow_ = options_.packBelowBlock >= 0 ? options_.packBelowBlock : cost_.packBelowBlock();
  unpackBelow_ = options_.unpackBelowBlock >= 0 ? options_.unpackBelowBlock : -1;
  loadTuning(caps);
  IBDT_LOG(kDebug, "messaging: memcpy ", cost_.memcpyBytesPerNs, " B/ns; per block ", cost_.iovecNsPerBlock,
           " ns to list, ", cost_.packNsPerBlock, " ns to pack (warm at ", cost_.packBytesPerNs, " B/ns); pack below ",
           packBelow_, " B blocks; receiver ",
           unpackBelow_ >= 0 ? strCat("unpacks below ", unpackBelow_, " B blocks")
                             : std::string("compares the schemes per message"));
  return Status::ok();
}

Status ContextImpl::createQueues() {
  IBDT_ASSIGN_OR_RETURN(sendQueue_, domain_.createCompletionQueue(static_cast<uint32_t>(size_ + 1) * sendQueueDepth_));
  IBDT_ASSIGN_OR_RETURN(recvQueue_, domain_.createCompletionQueue(static_cast<uint32_t>(size_ + 1) * recvDepth_));
  endpointOptions_.sendQueueDepth = sendQueueDepth_;
  endpointOptions_.recvQueueDepth = recvDepth_;
  endpointOptions_.maxInline = domain_.caps().maxInline;  // small control messages go inline
  return Status::ok();
}

Status ContextImpl::connectSelf() {
  // To reach itself a rank connects a pair of its own endpoints.
  peers_.resize(static_cast<size_t>(size_));
  credits_.init(size_, rank_);
  activePeers_.init(size_);
  for (int p = 0; p < size_; ++p) {
    peers_[static_cast<size_t>(p)].rank = p;
    peers_[static_cast<size_t>(p)].self = p == rank_;
  }
  Peer& self = peers_[static_cast<size_t>(rank_)];
  IBDT_ASSIGN_OR_RETURN(fabric::Endpoint * sender, createPeerEndpoint(self));
  self.sendEndpoint = sender;
  endpointRank_.set(sender->id(), rank_);
  IBDT_ASSIGN_OR_RETURN(auto receiver, domain_.createEndpoint(*sendQueue_, *recvQueue_, endpointOptions_));
  receiver->setPeerLabel(strCat("rank ", rank_, " (self)"));
  endpointRank_.set(receiver->id(), rank_);
  self.recvEndpoint = receiver.get();
  endpoints_.push_back(std::move(receiver));
  IBDT_RETURN_IF_ERROR(sender->connect(self.recvEndpoint->address()));
  IBDT_RETURN_IF_ERROR(self.recvEndpoint->connect(sender->address()));
  IBDT_RETURN_IF_ERROR(preparePeer(self, *self.recvEndpoint));
  self.link.state = LinkState::kConnected;
  self.link.remoteReady = true;
  return Status::ok();
}

Status ContextImpl::createBuffers() {
  const fabric::Caps& caps = domain_.caps();
  uint32_t sendSlots = std::max(kSendSlotsMin, 2 * options_.eagerCredits);
  IBDT_ASSIGN_OR_RETURN(sendSlots_, domain_.allocateMemory(sendSlots * slotSize(), fabric::kLocalWrite));
  for (uint32_t slot = sendSlots; slot-- > 0;) freeSendSlots_.push_back(slot);
  slotOwner_.resize(sendSlots);
  IBDT_ASSIGN_OR_RETURN(auto poolOptions, memory::PoolOptions::fromEnvironment());
  IBDT_ASSIGN_OR_RETURN(pool_, memory::BufferPool::create(domain_, poolOptions));
  IBDT_ASSIGN_OR_RETURN(auto cacheOptions, memory::CacheOptions::fromEnvironment());
  IBDT_ASSIGN_OR_RETURN(cache_, memory::RegistrationCache::create(domain_, cacheOptions));
  groupPlan_.cost = caps.registration;
  groupPlan_.pageSize = caps.pageSize;
  {
    // Pre-register a few segment buffers so the first rendezvous finds them.
    std::vector<memory::PoolBuffer> warm;
    for (int i = 0; i < 4; ++i) {
      IBDT_ASSIGN_OR_RETURN(auto buffer,
                            pool_->get(static_cast<size_t>(segmentSizeFor(1 << 30, options_.segmentSize))));
      warm.push_back(std::move(buffer));
    }
  }
  return Status::ok();
}

Status ContextImpl::connectPeers(const Bootstrap& bootstrap) {
  Connect connect = options_.connect;
  if (connect == Connect::kAuto) {
    IBDT_ASSIGN_OR_RETURN(int chosen, config::getChoice("IBDT_MSG_CONNECT", {"auto", "eager", "lazy"}));
    connect = static_cast<Connect>(chosen);
  }
  if (connect == Connect::kAuto) connect = size_ <= kEagerConnectRanks ? Connect::kEager : Connect::kLazy;
  IBDT_LOG(kDebug, "messaging: rank ", rank_, " of ", size_, " connects ",
           connect == Connect::kEager ? "eagerly" : "lazily");
  return connect == Connect::kEager ? connectEager(bootstrap) : startListening(bootstrap);
}

Status ContextImpl::repostSlot(Peer& peer, uint32_t slot) {
  activePeers_.mark(peer.rank);  // the credit it becomes may fall due
  fabric::Sge sge{reinterpret_cast<uint64_t>(peer.recvSlots->address()) + slot * slotSize(),
                  static_cast<uint32_t>(slotSize()), peer.recvSlots->lkey()};
  fabric::RecvRequest request;
  request.id = wrId(WrKind::kRecvSlot, (uint64_t{static_cast<uint32_t>(peer.rank)} << 24) | slot);
  request.sgList = &sge;
  request.numSge = 1;
  return peer.recvEndpoint->postRecv(request);
}

Result<uint32_t> ContextImpl::takeSendSlot() {
  if (freeSendSlots_.empty()) return makeError(Code::kAgain, "no free eager send buffer");
  uint32_t slot = freeSendSlots_.back();
  freeSendSlots_.pop_back();
  return slot;
}

Status ContextImpl::post(Peer& peer, std::vector<fabric::SendRequest>& requests) {
  if (requests.empty()) return Status::ok();
  for (size_t i = 0; i + 1 < requests.size(); ++i) requests[i].next = &requests[i + 1];
  requests.back().next = nullptr;
  Status status = peer.sendEndpoint->postSend(requests.front());
  if (!status.isOk()) {
    // Depth is tracked, so kAgain here means the provider disagrees with it.
    return status.withContext(strCat("posting ", requests.size(), " requests to rank ", peer.rank));
  }
  peer.sendOutstanding += static_cast<uint32_t>(requests.size());
  requests.clear();
  return Status::ok();
}

void ContextImpl::complete(Operation& op, Status status) {
  op.done = true;
  op.status = std::move(status);
  op.gathered = UserRegistration();  // a pipelined send's pin on its buffer
}

ContextImpl::~ContextImpl() {
  while (Unexpected* left = unexpected_.takeFirst([](const Unexpected&) { return true; })) delete left;
  // Receives still posted own themselves: break that cycle.
  while (Operation* left = posted_.takeFirst([](const Operation&) { return true; })) {
    std::shared_ptr<Operation> owner = std::move(left->postedSelf);
  }
  // Sends still going hold registrations of the cache that dies with us.
  for (Peer& peer : peers_) {
    for (PendingControl& message : peer.controlQueue) {
      if (message.eager) message.eager->gathered = UserRegistration();
    }
  }
  for (auto& owner : slotOwner_) {
    if (owner) owner->gathered = UserRegistration();
  }
}

void ContextImpl::failPeer(Peer& peer, Status status) {
  if (peer.failure.isOk()) {
    // After its close() a peer tears its endpoints down: expected, not a warning.
    if (peer.link.closeReceived)
      IBDT_LOG(kDebug, "messaging: rank ", peer.rank, " closed: ", status.toString());
    else
      IBDT_LOG(kWarn, "messaging: rank ", peer.rank, " failed: ", status.toString());
    peer.failure = status;
  }
  if (peer.link.state == LinkState::kRequested) {
    peer.link.state = LinkState::kIdle;
    --requesting_;
  }
  for (auto& message : peer.controlQueue) {
    if (message.eager) complete(*message.eager, peer.failure);
  }
  dropInbound(peer);
  peer.controlQueue.clear();
  peer.activeSends.clear();
  peer.activeReads.clear();
  std::erase_if(sendTransfers_, [&](auto& entry) {
    if (entry.second->op->peer != peer.rank) return false;
    complete(*entry.second->op, peer.failure);
    return true;
  });
  std::erase_if(recvTransfers_, [&](auto& entry) {
    if (entry.second->op->peer != peer.rank) return false;
    complete(*entry.second->op, peer.failure);
    return true;
  });
  // Receives that can only match this rank would wait forever.
  std::vector<Operation*> dead;
  posted_.forEach([&](Operation& op) {
    if (op.spec.source == peer.rank) dead.push_back(&op);
  });
  for (Operation* op : dead) {
    std::shared_ptr<Operation> owner = unpostReceive(*op);
    complete(*op, peer.failure);
  }
}

void ContextImpl::postReceive(std::shared_ptr<Operation> op) {
  posted_.pushBack(op.get());
  op->postedSelf = std::move(op);
}

std::shared_ptr<Operation> ContextImpl::unpostReceive(Operation& op) {
  if (!posted_.remove(&op)) return nullptr;
  return std::move(op.postedSelf);
}

Status ContextImpl::progress() {
  if (closed_) return Status::ok();
  credits_.releaseWithheld(*this);
  credits_.repostConsumed(*this, /*dueOnly=*/false);
  if (listener_) IBDT_RETURN_IF_ERROR(pollConnections());
  std::span<fabric::Completion> batch(polled_);
  size_t got = recvQueue_->poll(batch);
  for (size_t i = 0; i < got; ++i) IBDT_RETURN_IF_ERROR(handleReceive(batch[i]));
  got = sendQueue_->poll(batch);
  for (size_t i = 0; i < got; ++i) IBDT_RETURN_IF_ERROR(handleSendCompletion(batch[i]));
  if (oneSided_ && oneSided_->waiting()) IBDT_RETURN_IF_ERROR(oneSided_->advance());
  credits_.repostConsumed(*this, /*dueOnly=*/true);
  for (int rank : activePeers_.takeForWalk()) {
    Peer& peer = peers_[static_cast<size_t>(rank)];
    if (!peerHasWork(peer)) continue;
    // failPeer dropped a failed peer's work; after our close we send nothing.
    if (!peer.failure.isOk() || peer.link.closeSent) continue;
    if (!peer.link.ready()) {  // its work waits for the link: visit it again
      activePeers_.mark(rank);
      continue;
    }
    Status status = flushControl(peer);
    if (status.isOk()) {
      status = advanceListed(
          peer.activeSends, sendTransfers_, [&](SendTransfer& t) { return advanceSend(peer, t); },
          [](const SendTransfer& t) { return t.next == t.cts.bytes; });
    }
    if (status.isOk()) {
      status = advanceListed(
          peer.activeReads, recvTransfers_, [&](RecvTransfer& t) { return advanceReads(peer, t); },
          [](const RecvTransfer& t) { return t.readNext == t.bytes; });
    }
    if (status.isOk()) status = sendCreditIfOwed(peer);
    if (!status.isOk())
      failPeer(peer, status);
    else if (peerHasWork(peer))
      activePeers_.mark(rank);
  }
  return Status::ok();
}

Status ContextImpl::handleReceive(const fabric::Completion& completion) {
  ++events_;
  const int* rank = endpointRank_.find(completion.endpointId);
  if (rank == nullptr || wrKind(completion.id) != WrKind::kRecvSlot) {
    return makeError(Code::kInternal, "receive completion for unknown endpoint ", completion.endpointId);
  }
  Peer& peer = peers_[static_cast<size_t>(*rank)];
  uint32_t slot = static_cast<uint32_t>(wrValue(completion.id) & 0xffffff);
  if (completion.status != fabric::CompletionStatus::kSuccess) {
    failPeer(peer, completionFailure(completion, peer, "receive"));
    return Status::ok();
  }
  if (!peer.failure.isOk()) return Status::ok();
  if (peer.link.closeReceived) {  // its close() promised that nothing more follows
    failPeer(peer, makeError(Code::kProtocol, "rank ", peer.rank, " sent more after it closed"));
    return Status::ok();
  }
  peer.link.remoteReady = true;  // it sent this, so its side is connected
  bool countsCredit = true;
  Status status;
  if (completion.opcode == fabric::Opcode::kRecvWriteWithImm) {
    status = handleDataImm(peer, completion.immData);
  } else {
    const uint8_t* data = static_cast<const uint8_t*>(peer.recvSlots->address()) + slot * slotSize();
    std::span<const uint8_t> message(data, std::min<size_t>(completion.byteLength, slotSize()));
    auto header = wire::read<wire::Header>(message, 0);
    countsCredit = !header.isOk() || (header->kind != wire::Kind::kCredit && header->kind != wire::Kind::kClose);
    status = dispatchControl(peer, message);
  }
  if (!status.isOk()) {
    failPeer(peer, status);
    return Status::ok();
  }
  credits_.consumed(*this, peer.rank, slot, countsCredit);
  return Status::ok();
}

bool ContextImpl::receivePostedFrom(int rank) const {
  bool found = false;
  posted_.forEach(
      [&](const Operation& op) { found = found || op.spec.source == kAnySource || op.spec.source == rank; });
  return found;
}

void ContextImpl::holdUnexpected(Unexpected& unexpected, size_t bytes) {
  unexpected.heldBytes += bytes;
  unexpectedBytes_ += bytes;
  counters_.unexpectedBytesPeak = std::max(counters_.unexpectedBytesPeak, unexpectedBytes_);
}

void ContextImpl::releaseUnexpected(Unexpected& unexpected) {
  unexpectedBytes_ -= unexpected.heldBytes;
  unexpected.heldBytes = 0;
}

Status ContextImpl::dispatchControl(Peer& peer, std::span<const uint8_t> message) {
  IBDT_ASSIGN_OR_RETURN(wire::Header header, readFrom<wire::Header>(peer, message, 0));
  IBDT_RETURN_IF_ERROR(credits_.returned(peer.rank, header.credits));
  size_t offset = sizeof(header);
  bool startsMessage =
      header.kind == wire::Kind::kEager || header.kind == wire::Kind::kRts || header.kind == wire::Kind::kPipelined;
  if (startsMessage && peer.inbound.active) {
    return makeError(Code::kProtocol, "rank ", peer.rank, " started a message at byte ", peer.inbound.received,
                     " of its ", peer.inbound.envelope.bytes, "-byte pipelined message");
  }
  switch (header.kind) {
    case wire::Kind::kEager:
      return dispatchEager(peer, message, offset);
    case wire::Kind::kPipelined:
      return dispatchPipelined(peer, message, offset);
    case wire::Kind::kFragment: {
      IBDT_ASSIGN_OR_RETURN(auto fragment, readFrom<wire::Fragment>(peer, message, offset));
      return handleFragment(peer, fragment, message.subspan(offset + sizeof(fragment)));
    }
    case wire::Kind::kRts:
      return dispatchRts(peer, message, offset);
    case wire::Kind::kCts:
      return dispatchCts(peer, message, offset);
    case wire::Kind::kPacked: {
      IBDT_ASSIGN_OR_RETURN(auto packed, readFrom<wire::Packed>(peer, message, offset));
      return handlePacked(peer, packed);
    }
    case wire::Kind::kFin: {
      IBDT_ASSIGN_OR_RETURN(auto fin, readFrom<wire::Fin>(peer, message, offset));
      return handleFin(peer, fin);
    }
    case wire::Kind::kRelease: {
      IBDT_ASSIGN_OR_RETURN(auto release, readFrom<wire::Release>(peer, message, offset));
      return handleRelease(peer, release);
    }
    case wire::Kind::kCredit:
      return Status::ok();
    case wire::Kind::kClose:
      return handleClose(peer);
  }
  return makeError(Code::kProtocol, "unknown control message kind ", static_cast<int>(header.kind), " from rank ",
                   peer.rank);
}

// The message kinds whose body is more than one record, at `offset` (after the header).
Status ContextImpl::dispatchEager(Peer& peer, std::span<const uint8_t> message, size_t offset) {
  IBDT_ASSIGN_OR_RETURN(auto envelope, readFrom<wire::Envelope>(peer, message, offset));
  auto payload = message.subspan(offset + sizeof(envelope));
  if (envelope.bytes < 0 || static_cast<uint64_t>(envelope.bytes) != payload.size()) {
    return makeError(Code::kProtocol, "eager message from rank ", peer.rank, " claims ", envelope.bytes,
                     " bytes and carries ", payload.size());
  }
  handleEager(peer, envelope, payload);
  return Status::ok();
}

Status ContextImpl::dispatchPipelined(Peer& peer, std::span<const uint8_t> message, size_t offset) {
  IBDT_ASSIGN_OR_RETURN(auto envelope, readFrom<wire::Envelope>(peer, message, offset));
  auto payload = message.subspan(offset + sizeof(envelope));
  if (payload.empty() || envelope.bytes <= static_cast<int64_t>(payload.size())) {
    return makeError(Code::kProtocol, "pipelined message from rank ", peer.rank, " claims ", envelope.bytes,
                     " bytes and starts with ", payload.size());
  }
  return handlePipelined(peer, envelope, payload);
}

Status ContextImpl::dispatchRts(Peer& peer, std::span<const uint8_t> message, size_t offset) {
  IBDT_ASSIGN_OR_RETURN(auto envelope, readFrom<wire::Envelope>(peer, message, offset));
  IBDT_ASSIGN_OR_RETURN(auto rts, readFrom<wire::Rts>(peer, message, offset + sizeof(envelope)));
  if (envelope.bytes <= 0) return makeError(Code::kProtocol, "RTS from rank ", peer.rank, " with no data");
  handleRts(peer, envelope, rts);
  return Status::ok();
}

Status ContextImpl::dispatchCts(Peer& peer, std::span<const uint8_t> message, size_t offset) {
  IBDT_ASSIGN_OR_RETURN(auto cts, readFrom<wire::Cts>(peer, message, offset));
  auto layout = message.subspan(offset + sizeof(cts));
  if (cts.hasLayout && layout.size() != cts.layoutBytes) {
    return makeError(Code::kProtocol, "CTS from rank ", peer.rank, " for transfer ", cts.senderTransfer,
                     " announces a ", cts.layoutBytes, "-byte layout and carries ", layout.size());
  }
  return handleCts(peer, cts, cts.hasLayout ? layout : std::span<const uint8_t>());
}

Status ContextImpl::handleSendCompletion(const fabric::Completion& completion) {
  ++events_;
  const int* rank = endpointRank_.find(completion.endpointId);
  if (rank == nullptr) {
    return makeError(Code::kInternal, "send completion for unknown endpoint ", completion.endpointId);
  }
  Peer& peer = peers_[static_cast<size_t>(*rank)];
  bool ok = completion.status == fabric::CompletionStatus::kSuccess;
  if (wrKind(completion.id) == WrKind::kInPlace) {  // unsignaled: only a failure completes
    if (!ok) failPeer(peer, completionFailure(completion, peer, "control send"));
    return Status::ok();
  }
  if (peer.sendOutstanding > 0) --peer.sendOutstanding;
  uint64_t value = wrValue(completion.id);
  switch (wrKind(completion.id)) {
    case WrKind::kSlot: {
      auto slot = static_cast<uint32_t>(value);
      freeSendSlots_.push_back(slot);
      Status status = ok ? Status::ok() : completionFailure(completion, peer, "control send");
      if (slotOwner_[slot]) fragmentSent(slot, status);
      if (!ok) failPeer(peer, std::move(status));
      return Status::ok();
    }
    case WrKind::kSendData: {
      Status status = ok ? onSendDataCompleted(static_cast<uint32_t>(value))
                         : completionFailure(completion, peer, strCat("rendezvous write of transfer ", value));
      if (!status.isOk()) failPeer(peer, status);
      return Status::ok();
    }
    case WrKind::kRead: {
      if (peer.readsOutstanding > 0) --peer.readsOutstanding;
      Status status = ok ? onReadCompleted(static_cast<uint32_t>(value))
                         : completionFailure(completion, peer, strCat("P-RRS read of transfer ", value));
      if (!status.isOk()) failPeer(peer, status);
      return Status::ok();
    }
    case WrKind::kOneSided: {
      Status status = ok ? Status::ok() : completionFailure(completion, peer, strCat("one-sided write ", value));
      if (oneSided_) oneSided_->writeCompleted(static_cast<uint32_t>(value), status);
      if (!status.isOk()) failPeer(peer, status);
      return Status::ok();
    }
    default:
      return makeError(Code::kInternal, "send completion with unknown id ", completion.id);
  }
}

Result<Staging> ContextImpl::pooledBuffer(size_t bytes) {
  Staging staging;
  IBDT_ASSIGN_OR_RETURN(staging.pooled, pool_->get(bytes));
  return staging;
}

Result<Staging> ContextImpl::dedicatedBuffer(size_t bytes) {
  // The paper's generic scheme: memory allocated for this message and
  // registered (not cached), as an application would malloc a pack buffer.
  Staging staging;
  size_t page = domain_.caps().pageSize;
  size_t rounded = (std::max<size_t>(bytes, 1) + page - 1) / page * page;
  staging.memory.reset(static_cast<uint8_t*>(std::aligned_alloc(page, rounded)));
  if (!staging.memory) return makeError(Code::kResource, "allocating a ", bytes, "-byte staging buffer");
  std::memset(staging.memory.get(), 0, rounded);  // registration wants mapped pages
  auto region = domain_.registerMemory(staging.memory.get(), rounded, memory::PoolOptions().access);
  if (!region.isOk()) {
    return std::move(region).takeStatus().withContext(strCat("registering a ", bytes, "-byte staging buffer"));
  }
  staging.dedicated = std::move(region).value();
  return staging;
}

Result<UserRegistration> ContextImpl::registerUser(const Operation& op, int64_t bytes, uint32_t access, bool single) {
  const void* base = op.isSend ? op.sendBuffer : op.recvBuffer;
  auto registration = UserRegistration::create(*cache_, groupPlan_, *op.segment, op.type, op.count, op.stats, base,
                                               bytes, access, single);
  if (!registration.isOk()) {
    return std::move(registration)
        .takeStatus()
        .withContext(strCat("registering the user buffer of a ", bytes, "-byte message with rank ", op.peer));
  }
  return registration;
}

Result<Unexpected*> ContextImpl::matchOrQueue(Peer& peer, const wire::Envelope& envelope,
                                              std::shared_ptr<Operation>* op) {
  if (envelope.source != peer.rank) {
    return makeError(Code::kProtocol, "rank ", peer.rank, " sent a message claiming source ", envelope.source);
  }
  if (envelope.tag < 0) {  // no send has one; kAnyTag would then match as a tag
    return makeError(Code::kProtocol, "rank ", peer.rank, " sent a message with negative tag ", envelope.tag);
  }
  Envelope match{envelope.source, envelope.tag, envelope.communicator};
  Operation* found = posted_.takeFirst([&](const Operation& candidate) { return candidate.spec.accepts(match); });
  if (found != nullptr) {
    *op = std::move(found->postedSelf);
    return nullptr;
  }
  auto* unexpected = new Unexpected;
  unexpected->envelope = match;
  unexpected->peer = peer.rank;
  unexpected->wireEnvelope = envelope;
  unexpected_.pushBack(unexpected);
  ++counters_.unexpected;
  holdUnexpected(*unexpected, sizeof(Unexpected));
  return unexpected;
}

}  // namespace ibdt::messaging
