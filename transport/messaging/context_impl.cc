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
  return fabric::completionError(completion, strCat("rank ", peer.rank())).withContext(what);
}

}  // namespace

// OneSided::Host: a put's writes, all or none.
Result<bool> ContextImpl::postAllOrNone(int rank, std::vector<fabric::SendRequest>& requests) {
  Peer& peer = this->peer(rank);
  if (!connections_.ready(rank) || !peer.sendFits(limits_.sendQueueDepth, requests.size())) return false;
  IBDT_RETURN_IF_ERROR(peer.postChain(requests));
  return true;
}

ContextImpl::~ContextImpl() {
  // Sends still going hold registrations of the cache that dies with us.
  for (Peer& peer : peers_) peer.control().releaseRegistrations();
  sendSlots_.releaseRegistrations();
}

void ContextImpl::failPeer(Peer& peer, Status status) {
  if (!peer.failed()) {
    // After its close() a peer tears its endpoints down: expected, not a warning.
    if (connections_.link(peer.rank()).closeReceived)
      IBDT_LOG(kDebug, "messaging: rank ", peer.rank(), " closed: ", status.toString());
    else
      IBDT_LOG(kWarn, "messaging: rank ", peer.rank(), " failed: ", status.toString());
    peer.fail(std::move(status));
  }
  int rank = peer.rank();
  const Status& failure = peer.failure();
  connections_.peerFailed(rank);
  peer.control().fail(failure);
  arrivals_.dropInbound(peer);
  sender_.failPeer(rank, failure);
  receiver_.failPeer(rank, failure);
  // Receives that can only match this rank would wait forever.
  for (auto& dead : matching_.unpostAll([&](const Operation& op) { return op.spec.source == rank; })) {
    complete(*dead, failure);
  }
}

Status ContextImpl::progressUntilDone(const Operation& op, Deadline deadline, std::string_view what) {
  Backoff backoff(spins_);
  while (!op.done) {
    uint64_t before = events_;
    IBDT_RETURN_IF_ERROR(progress());
    if (op.done) break;
    if (deadline.expired()) return makeError(Code::kTimeout, what, " did not complete in time");
    if (events_ != before) {
      backoff.reset();
    } else if (backoff.napping()) {
      // Sleep until a peer's message arrives rather than for a fixed nap: the
      // arrival wakes us at once. Still bounded by the nap, as what the
      // receive queue does not ring for (our sends' completions) is polled.
      const auto nap = std::chrono::nanoseconds(Backoff::kNapNanos);
      Status slept = peers_.recvQueue().wait(deadline.remaining() < nap ? deadline : Deadline::after(nap));
      if (!slept.isOk() && slept.code() != Code::kTimeout) return slept;
    } else {
      backoff.pause();
    }
  }
  return Status::ok();
}

Status ContextImpl::progress() {
  if (closed_) return Status::ok();
  credits_.beginProgress();
  credits_.releaseWithheld(*this);
  credits_.repostConsumed(*this, /*dueOnly=*/false);
  if (connections_.listening()) IBDT_RETURN_IF_ERROR(connections_.poll(events_));
  std::span<fabric::Completion> batch(polled_);
  size_t got = peers_.recvQueue().poll(batch);
  for (size_t i = 0; i < got; ++i) IBDT_RETURN_IF_ERROR(handleReceive(batch[i]));
  got = peers_.sendQueue().poll(batch);
  for (size_t i = 0; i < got; ++i) IBDT_RETURN_IF_ERROR(handleSendCompletion(batch[i]));
  if (oneSided_ && oneSided_->waiting()) IBDT_RETURN_IF_ERROR(oneSided_->advance());
  credits_.repostConsumed(*this, /*dueOnly=*/true);
  for (int rank : activePeers_.takeForWalk()) {
    Peer& peer = this->peer(rank);
    if (!peerHasWork(peer)) continue;
    // failPeer dropped a failed peer's work; after our close we send nothing.
    if (peer.failed() || connections_.link(rank).closeSent) continue;
    if (!connections_.ready(rank)) {  // its work waits for the link: visit it again
      activePeers_.mark(rank);
      continue;
    }
    Status status = control_.flush(peer);
    if (status.isOk()) status = sender_.advance(rank);
    if (status.isOk()) status = receiver_.advance(rank);
    if (status.isOk()) status = control_.sendCreditIfOwed(peer);
    if (status.isOk()) status = control_.giveBackIfAsked(peer);
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
  // Two identities: the sender (the endpoint the completion names), whose
  // credit the message consumed, and the buffer it is in (the work request
  // id): the sender's own slot, or under a shared receive queue whichever
  // pool slot was at the queue's head.
  Peer* found = peers_.find(completion.endpointId);
  bool knownBuffer = wrKind(completion.id) == WrKind::kRecvSlot || ReceivePool::names(completion.id);
  if (found == nullptr || !knownBuffer) {
    return makeError(Code::kInternal, "receive completion for unknown endpoint ", completion.endpointId);
  }
  Peer& peer = *found;
  // Whatever happens to the message, its buffer goes back (a failed
  // sender's own buffers excepted: repostBuffer).
  CreditFlow::Use use = CreditFlow::Use::kReserve;
  if (completion.status != fabric::CompletionStatus::kSuccess) {
    failPeer(peer, completionFailure(completion, peer, "receive"));
  } else if (!peer.failed()) {
    use = deliver(peer, completion);
  }
  credits_.consumed(*this, peer.rank(), completion.id, peer.failed() ? CreditFlow::Use::kReserve : use);
  return Status::ok();
}

CreditFlow::Use ContextImpl::deliver(Peer& peer, const fabric::Completion& completion) {
  using Use = CreditFlow::Use;
  int rank = peer.rank();
  if (connections_.link(rank).closeReceived) {  // its close() promised that nothing more follows
    failPeer(peer, makeError(Code::kProtocol, "rank ", rank, " sent more after it closed"));
    return Use::kReserve;
  }
  connections_.heardFrom(rank);  // it sent this, so its side is connected
  Use use = Use::kCredit;
  Status status;
  if (completion.opcode == fabric::Opcode::kRecvWriteWithImm) {
    status = receiver_.onWriteImm(rank, completion.immData);
  } else {
    std::span<const uint8_t> message = receivedMessage(peer, completion);
    auto header = wire::read<wire::Header>(message, 0);
    if (header.isOk() && (header->kind == wire::Kind::kCredit || header->kind == wire::Kind::kClose)) {
      use = Use::kReserve;
    } else if (header.isOk() && header->kind == wire::Kind::kGiveBack) {
      use = Use::kGiveBack;
    }
    status = arrivals_.dispatch(peer, message);
    if (credits_.giveBackAsked(rank)) activePeers_.mark(rank);  // it sent kReclaim
  }
  if (!status.isOk()) failPeer(peer, status);
  return use;
}

std::span<const uint8_t> ContextImpl::receivedMessage(const Peer& sender, const fabric::Completion& completion) const {
  if (ReceivePool::names(completion.id)) {
    return receivePool_.message(ReceivePool::slotOf(completion.id), completion.byteLength);
  }
  return sender.slotMessage(Peer::slotOf(completion.id), completion.byteLength);
}

Status ContextImpl::repostBuffer(int sender, uint64_t buffer) {
  bool failed = peer(sender).failed();
  if (!failed) activePeers_.mark(sender);  // the credit it becomes may fall due
  if (receivePool_.handsOutSlots()) {  // IBDT_MSG_EAGER_POOL: back to the sender's own queue
    if (!failed) return receivePool_.post(ReceivePool::slotOf(buffer), *peer(sender).recvEndpoint());
    receivePool_.giveBack(ReceivePool::slotOf(buffer));
    return Status::ok();
  }
  if (ReceivePool::names(buffer)) return receivePool_.repost(ReceivePool::slotOf(buffer));
  if (failed) return Status::ok();  // its receives are flushed or gone
  return peer(sender).repostSlot(Peer::slotOf(buffer));
}

uint64_t ContextImpl::grantableBuffers() const {
  // The shares of endpoints not readied yet (lazy connection) stay reserved.
  uint64_t reserved = uint64_t{static_cast<uint32_t>(size_) - endpointsOpened_} * (options_.eagerCredits + CreditFlow::kReserveSlots);
  uint64_t available = receivePool_.available();
  return available > reserved ? available - reserved : 0;
}

Result<bool> ContextImpl::grantBuffer(int rank) {
  if (grantableBuffers() == 0) return false;
  IBDT_ASSIGN_OR_RETURN(uint32_t slot, receivePool_.take(domain_));
  IBDT_RETURN_IF_ERROR(receivePool_.post(slot, *peer(rank).recvEndpoint()));
  return true;
}

Status ContextImpl::handleSendCompletion(const fabric::Completion& completion) {
  ++events_;
  Peer* found = peers_.find(completion.endpointId);
  if (found == nullptr) {
    return makeError(Code::kInternal, "send completion for unknown endpoint ", completion.endpointId);
  }
  Peer& peer = *found;
  bool ok = completion.status == fabric::CompletionStatus::kSuccess;
  if (wrKind(completion.id) == WrKind::kInPlace) {  // unsignaled: only a failure completes
    if (!ok) failPeer(peer, completionFailure(completion, peer, "control send"));
    return Status::ok();
  }
  peer.sendCompleted();
  uint64_t value = wrValue(completion.id);
  switch (wrKind(completion.id)) {
    case WrKind::kSlot: {
      Status status = ok ? Status::ok() : completionFailure(completion, peer, "control send");
      sendSlots_.completed(static_cast<uint32_t>(value), status);
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
      peer.readCompleted();
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

}  // namespace ibdt::messaging
