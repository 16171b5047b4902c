// The core of a Context: completion dispatch, send slots, peer failure and matching.
#include "transport/messaging/context_impl.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "base/config.h"
#include "base/log.h"

namespace ibdt::messaging {
namespace {

Status completionFailure(const fabric::Completion& completion, const Peer& peer, std::string_view what) {
  return fabric::completionError(completion, strCat("rank ", peer.rank)).withContext(what);
}

}  // namespace

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

ContextImpl::~ContextImpl() {
  // Sends still going hold registrations of the cache that dies with us.
  for (Peer& peer : peers_) peer.control.releaseRegistrations();
  for (auto& reader : slotOwner_) {
    if (reader) reader->releaseRegistration();
  }
}

void ContextImpl::failPeer(Peer& peer, Status status) {
  if (peer.failure.isOk()) {
    // After its close() a peer tears its endpoints down: expected, not a warning.
    if (connections_.link(peer.rank).closeReceived)
      IBDT_LOG(kDebug, "messaging: rank ", peer.rank, " closed: ", status.toString());
    else
      IBDT_LOG(kWarn, "messaging: rank ", peer.rank, " failed: ", status.toString());
    peer.failure = status;
  }
  connections_.peerFailed(peer.rank);
  peer.control.fail(peer.failure);
  dropInbound(peer);
  sender_.failPeer(peer.rank, peer.failure);
  receiver_.failPeer(peer.rank, peer.failure);
  // Receives that can only match this rank would wait forever.
  for (auto& dead : matching_.unpostAll([&](const Operation& op) { return op.spec.source == peer.rank; })) {
    complete(*dead, peer.failure);
  }
}

Status ContextImpl::progress() {
  if (closed_) return Status::ok();
  credits_.releaseWithheld(*this);
  credits_.repostConsumed(*this, /*dueOnly=*/false);
  if (connections_.listening()) IBDT_RETURN_IF_ERROR(connections_.poll(events_));
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
    if (!peer.failure.isOk() || connections_.link(rank).closeSent) continue;
    if (!connections_.ready(rank)) {  // its work waits for the link: visit it again
      activePeers_.mark(rank);
      continue;
    }
    Status status = flushControl(peer);
    if (status.isOk()) status = sender_.advance(rank);
    if (status.isOk()) status = receiver_.advance(rank);
    if (status.isOk()) status = sendCreditIfOwed(peer);
    if (!status.isOk()) {
      failPeer(peer, status);
    } else if (peerHasWork(peer)) {
      activePeers_.mark(rank);
    }
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
  if (connections_.link(peer.rank).closeReceived) {  // its close() promised that nothing more follows
    failPeer(peer, makeError(Code::kProtocol, "rank ", peer.rank, " sent more after it closed"));
    return Status::ok();
  }
  connections_.heardFrom(peer.rank);  // it sent this, so its side is connected
  bool countsCredit = true;
  Status status;
  if (completion.opcode == fabric::Opcode::kRecvWriteWithImm) {
    status = receiver_.onWriteImm(peer.rank, completion.immData);
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
      if (std::shared_ptr<PipelinedSend> reader = std::move(slotOwner_[slot])) reader->fragmentSent(status);
      if (!ok) failPeer(peer, std::move(status));
      return Status::ok();
    }
    case WrKind::kSendData: {
      Status status = ok ? sender_.onWriteCompleted(static_cast<uint32_t>(value))
                         : completionFailure(completion, peer, strCat("rendezvous write of transfer ", value));
      if (!status.isOk()) failPeer(peer, status);
      return Status::ok();
    }
    case WrKind::kRead: {
      if (peer.readsOutstanding > 0) --peer.readsOutstanding;
      Status status = ok ? receiver_.onReadCompleted(static_cast<uint32_t>(value))
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

}  // namespace ibdt::messaging
