// Context set-up: the steps of init, and the endpoints to peers (their
// links are Connections', connections.h; the checks and limits derived
// first are context_limits.h's).
#include <algorithm>

#include "base/config.h"
#include "base/log.h"
#include "transport/messaging/context_impl.h"

namespace ibdt::messaging {
namespace {

constexpr uint32_t kSendSlotsMin = 64;

}  // namespace

Status ContextImpl::init(const Bootstrap& bootstrap) {
  rank_ = bootstrap.rank;
  size_ = bootstrap.size;
  control_.setRank(rank_);
  services_.setRank(rank_);
  IBDT_RETURN_IF_ERROR(checkSetup(bootstrap, options_));
  spins_ = spinsFor(bootstrap, options_);
  IBDT_ASSIGN_OR_RETURN(EagerShape eager, eagerShapeFor(bootstrap, options_));
  const uint32_t creditCeiling = options_.eagerCredits;
  options_.eagerCredits = eager.credits;
  options_.eagerLimit = eager.eagerLimit;
  IBDT_ASSIGN_OR_RETURN(limits_, readProviderLimits(domain_.caps(), options_.eagerCredits, slotSize(),
                                                    options_.eagerLimit));
  IBDT_RETURN_IF_ERROR(chooseSharedReceives(domain_, size_, limits_));
  if (limits_.sharedReceiveDepth != 0) {
    receivePool_.enable(slotSize(), limits_.recvDepth);
  } else {
    IBDT_RETURN_IF_ERROR(enableEagerPool(creditCeiling));
  }
  IBDT_LOG(kDebug, "messaging: rank ", rank_, ": eager receive buffers ",
           limits_.sharedReceiveDepth != 0
               ? strCat("in one pool under a shared receive queue of ", limits_.sharedReceiveDepth)
               : std::string("per peer"));
  IBDT_RETURN_IF_ERROR(measureCosts());
  IBDT_RETURN_IF_ERROR(peers_.init(rank_, size_, limits_, [this](Peer& peer, fabric::Endpoint& endpoint) {
    return preparePeer(peer, endpoint);
  }));
  IBDT_RETURN_IF_ERROR(connectSelf());
  IBDT_RETURN_IF_ERROR(createBuffers());
  return connectPeers(bootstrap);
}

Status ContextImpl::measureCosts() {
  return selector_.init(domain_.caps(), limits_.maxSge, options_.listPost ? limits_.sendQueueDepth : 1);
}

Status ContextImpl::connectSelf() {
  credits_.init(size_, rank_, options_.eagerCredits);
  if (eagerPool_.ceiling != 0) {
    uint64_t shares = uint64_t{static_cast<uint32_t>(size_)} * (eagerPool_.guaranteed + CreditFlow::kReserveSlots);
    credits_.enablePool(eagerPool_.ceiling, eagerPool_.slots - shares);
  }
  activePeers_.init(size_);
  connections_.init(rank_, size_, options_.connectTimeoutMs);
  IBDT_RETURN_IF_ERROR(peers_.connectSelf());
  connections_.markConnected(rank_, /*counted=*/false);
  return Status::ok();
}

Status ContextImpl::createBuffers() {
  uint32_t sendSlots = std::max(kSendSlotsMin, 2 * options_.eagerCredits);
  IBDT_RETURN_IF_ERROR(sendSlots_.allocate(domain_, sendSlots, slotSize()));
  return services_.createBuffers();
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
  return connect == Connect::kEager ? connectEager(bootstrap) : connections_.listen(domain_, bootstrap);
}


Status ContextImpl::preparePeer(Peer& peer, fabric::Endpoint& endpoint) {
  activePeers_.mark(peer.rank());  // the credits its slots become may fall due
  peers_.attach(peer, endpoint);
  // Its buffers before anyone can send to it: the peer's own, or a chunk of
  // the shared pool as large (receive_pool.h).
  if (receivePool_.handsOutSlots()) {
    IBDT_RETURN_IF_ERROR(openPooledSlots(peer));
  } else {
    IBDT_RETURN_IF_ERROR(receivePool_.enabled() ? receivePool_.grow(domain_, endpoint)
                                                : peer.openSlots(domain_, limits_.recvDepth, slotSize()));
  }
  credits_.reset(peer.rank());
  return Status::ok();
}

Status ContextImpl::enableEagerPool(uint32_t creditCeiling) {
  IBDT_ASSIGN_OR_RETURN(bool on, eagerPoolFromEnvironment());
  IBDT_ASSIGN_OR_RETURN(uint64_t budget, eagerBudgetFromEnvironment());
  if (!on || budget == 0) return Status::ok();
  eagerPool_ = eagerPoolWithin(budget, slotSize(), size_, creditCeiling);
  options_.eagerCredits = eagerPool_.guaranteed;
  // Receive queues deep enough for the most a peer may be granted; only
  // the buffers granted are posted.
  IBDT_ASSIGN_OR_RETURN(limits_, readProviderLimits(domain_.caps(), eagerPool_.ceiling, slotSize(),
                                                    options_.eagerLimit));
  // One allocation for the whole pool: a peer maps it once, and (on shm,
  // above 4 MiB) only the pages written are resident, in the owner and in
  // each sender. Chunks shared by many peers were each mapped and faulted
  // in whole by every peer that was ever posted a buffer in them (1.5 GiB
  // of Rss per rank at 128 ranks, though shared; docs/many-ranks.md).
  receivePool_.enableFreeSlots(slotSize(), static_cast<uint32_t>(eagerPool_.slots), eagerPool_.slots);
  IBDT_LOG(kDebug, "messaging: rank ", rank_, ": eager pool of ", eagerPool_.slots, " buffers, ",
           eagerPool_.guaranteed, " credits per peer guaranteed, up to ", eagerPool_.ceiling);
  return Status::ok();
}

Status ContextImpl::openPooledSlots(Peer& peer) {
  for (uint32_t i = 0; i < options_.eagerCredits + CreditFlow::kReserveSlots; ++i) {
    IBDT_ASSIGN_OR_RETURN(uint32_t slot, receivePool_.take(domain_));
    IBDT_RETURN_IF_ERROR(receivePool_.post(slot, *peer.recvEndpoint()));
  }
  ++endpointsOpened_;
  return Status::ok();
}

Status ContextImpl::connectEager(const Bootstrap& bootstrap) {
  IBDT_RETURN_IF_ERROR(peers_.connectMesh(bootstrap));
  for (const Peer& peer : peers_) {
    if (!peer.self()) connections_.markConnected(peer.rank(), /*counted=*/true);
  }
  return Status::ok();
}

}  // namespace ibdt::messaging
