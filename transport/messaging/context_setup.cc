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
  IBDT_RETURN_IF_ERROR(checkSetup(bootstrap, options_));
  spins_ = spinsFor(bootstrap, options_);
  IBDT_ASSIGN_OR_RETURN(options_.eagerCredits, eagerCreditsFor(bootstrap, options_, slotSize()));
  IBDT_ASSIGN_OR_RETURN(limits_, readProviderLimits(domain_.caps(), options_.eagerCredits, slotSize(),
                                                    options_.eagerLimit));
  IBDT_RETURN_IF_ERROR(measureCosts());
  IBDT_RETURN_IF_ERROR(createQueues());
  IBDT_RETURN_IF_ERROR(connectSelf());
  IBDT_RETURN_IF_ERROR(createBuffers());
  return connectPeers(bootstrap);
}

Status ContextImpl::measureCosts() {
  return selector_.init(domain_.caps(), limits_.maxSge, options_.listPost ? limits_.sendQueueDepth : 1);
}

Status ContextImpl::createQueues() {
  auto ranks = static_cast<uint32_t>(size_ + 1);
  IBDT_ASSIGN_OR_RETURN(sendQueue_, domain_.createCompletionQueue(ranks * limits_.sendQueueDepth));
  IBDT_ASSIGN_OR_RETURN(recvQueue_, domain_.createCompletionQueue(ranks * limits_.recvDepth));
  endpointOptions_.sendQueueDepth = limits_.sendQueueDepth;
  endpointOptions_.recvQueueDepth = limits_.recvDepth;
  endpointOptions_.maxInline = domain_.caps().maxInline;  // small control messages go inline
  return Status::ok();
}

Status ContextImpl::connectSelf() {
  // To reach itself a rank connects a pair of its own endpoints.
  peers_.reserve(static_cast<size_t>(size_));
  for (int p = 0; p < size_; ++p) peers_.emplace_back(p, p == rank_);
  credits_.init(size_, rank_, options_.eagerCredits);
  activePeers_.init(size_);
  connections_.init(rank_, size_, options_.connectTimeoutMs);
  Peer& self = peer(rank_);
  IBDT_ASSIGN_OR_RETURN(fabric::Endpoint * sender, createPeerEndpoint(self));
  endpointRank_.set(sender->id(), rank_);
  IBDT_ASSIGN_OR_RETURN(auto receiver, domain_.createEndpoint(*sendQueue_, *recvQueue_, endpointOptions_));
  receiver->setPeerLabel(strCat("rank ", rank_, " (self)"));
  endpointRank_.set(receiver->id(), rank_);
  self.useSelfPair(*sender, *receiver);
  endpoints_.push_back(std::move(receiver));
  IBDT_RETURN_IF_ERROR(sender->connect(self.recvEndpoint()->address()));
  IBDT_RETURN_IF_ERROR(self.recvEndpoint()->connect(sender->address()));
  IBDT_RETURN_IF_ERROR(preparePeer(self, *self.recvEndpoint()));
  connections_.markConnected(rank_, /*counted=*/false);
  return Status::ok();
}

Status ContextImpl::createBuffers() {
  const fabric::Caps& caps = domain_.caps();
  uint32_t sendSlots = std::max(kSendSlotsMin, 2 * options_.eagerCredits);
  IBDT_RETURN_IF_ERROR(sendSlots_.allocate(domain_, sendSlots, slotSize()));
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
  return connect == Connect::kEager ? connectEager(bootstrap) : connections_.listen(domain_, bootstrap);
}


Result<fabric::Endpoint*> ContextImpl::createPeerEndpoint(Peer& peer) {
  auto endpoint = domain_.createEndpoint(*sendQueue_, *recvQueue_, endpointOptions_);
  if (!endpoint.isOk()) return std::move(endpoint).takeStatus().withContext(strCat("endpoint to rank ", peer.rank()));
  (*endpoint)->setPeerLabel(strCat("rank ", peer.rank()));
  endpoints_.push_back(std::move(endpoint).value());
  return endpoints_.back().get();
}

// A lazy link's endpoint: one per peer, kept across failed requests so that
// bad requests cost nothing per datagram.
Result<fabric::Endpoint*> ContextImpl::endpointTo(int rank) {
  Peer& peer = this->peer(rank);
  if (peer.hasEndpoint()) return peer.sendEndpoint();
  IBDT_ASSIGN_OR_RETURN(fabric::Endpoint * endpoint, createPeerEndpoint(peer));
  IBDT_RETURN_IF_ERROR(preparePeer(peer, *endpoint));
  return endpoint;
}

Status ContextImpl::preparePeer(Peer& peer, fabric::Endpoint& endpoint) {
  if (!peer.self()) peer.useEndpoint(endpoint);
  endpointRank_.set(endpoint.id(), peer.rank());
  activePeers_.mark(peer.rank());  // the credits its slots become may fall due
  IBDT_RETURN_IF_ERROR(peer.openSlots(domain_, limits_.recvDepth, slotSize()));
  credits_.reset(peer.rank());
  return Status::ok();
}

Status ContextImpl::connectEager(const Bootstrap& bootstrap) {
  fabric::MeshOptions mesh;
  mesh.endpoint = endpointOptions_;
  mesh.prepare = [this](fabric::Endpoint& endpoint, int rank) {
    return preparePeer(peer(rank), endpoint);
  };
  IBDT_ASSIGN_OR_RETURN(auto endpoints,
                        fabric::connectMesh(domain_, *sendQueue_, *recvQueue_, rank_, size_, bootstrap.allgather, mesh));
  for (auto& endpoint : endpoints) {
    if (endpoint) endpoints_.push_back(std::move(endpoint));
  }
  for (const Peer& peer : peers_) {
    if (!peer.self()) connections_.markConnected(peer.rank(), /*counted=*/true);
  }
  return Status::ok();
}

}  // namespace ibdt::messaging
