// Context set-up: the steps of init, and the endpoints to peers (their
// links are Connections', connections.h).
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <limits>

#include "base/config.h"
#include "base/log.h"
#include "transport/messaging/context_impl.h"
#include "transport/messaging/eager_budget.h"

namespace ibdt::messaging {
namespace {

constexpr uint32_t kSendSlotsMin = 64;

}  // namespace

Status ContextImpl::init(const Bootstrap& bootstrap) {
  rank_ = bootstrap.rank;
  size_ = bootstrap.size;
  IBDT_RETURN_IF_ERROR(checkSetup(bootstrap));
  chooseSpins(bootstrap);
  IBDT_RETURN_IF_ERROR(applyEagerBudget());
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

Status ContextImpl::applyEagerBudget() {
  // From here on options_.eagerCredits is the per-peer count every part of
  // the Context uses (buffers posted, credits granted, the tuned pipeline
  // window): every rank derives it from the same job size and knobs.
  IBDT_ASSIGN_OR_RETURN(uint64_t budget, eagerBudgetFromEnvironment());
  uint32_t credits = eagerCreditsWithin(budget, slotSize(), size_, options_.eagerCredits);
  IBDT_LOG(kDebug, "messaging: rank ", rank_, ": ", credits, " eager credits per peer (IBDT_MSG_CREDITS ",
           options_.eagerCredits, ", IBDT_MSG_EAGER_MEMORY ", budget, " over ", size_, " ranks)");
  options_.eagerCredits = credits;
  return Status::ok();
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
  return selector_.init(domain_.caps(), maxSge_, options_.listPost ? sendQueueDepth_ : 1);
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
  credits_.init(size_, rank_, options_.eagerCredits);
  activePeers_.init(size_);
  connections_.init(rank_, size_, options_.connectTimeoutMs);
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
  connections_.markConnected(rank_, /*counted=*/false);
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
  return connect == Connect::kEager ? connectEager(bootstrap) : connections_.listen(domain_, bootstrap);
}


Result<fabric::Endpoint*> ContextImpl::createPeerEndpoint(Peer& peer) {
  auto endpoint = domain_.createEndpoint(*sendQueue_, *recvQueue_, endpointOptions_);
  if (!endpoint.isOk()) return std::move(endpoint).takeStatus().withContext(strCat("endpoint to rank ", peer.rank));
  (*endpoint)->setPeerLabel(strCat("rank ", peer.rank));
  endpoints_.push_back(std::move(endpoint).value());
  return endpoints_.back().get();
}

// A lazy link's endpoint: one per peer, kept across failed requests so that
// bad requests cost nothing per datagram.
Result<fabric::Endpoint*> ContextImpl::endpointTo(int rank) {
  Peer& peer = peers_[static_cast<size_t>(rank)];
  if (peer.sendEndpoint != nullptr) return peer.sendEndpoint;
  IBDT_ASSIGN_OR_RETURN(fabric::Endpoint * endpoint, createPeerEndpoint(peer));
  IBDT_RETURN_IF_ERROR(preparePeer(peer, *endpoint));
  return endpoint;
}

Status ContextImpl::preparePeer(Peer& peer, fabric::Endpoint& endpoint) {
  if (!peer.self) peer.sendEndpoint = peer.recvEndpoint = &endpoint;
  endpointRank_.set(endpoint.id(), peer.rank);
  IBDT_ASSIGN_OR_RETURN(peer.recvSlots, domain_.allocateMemory(recvDepth_ * slotSize(), fabric::kLocalWrite));
  for (uint32_t slot = 0; slot < recvDepth_; ++slot) IBDT_RETURN_IF_ERROR(repostSlot(peer, slot));
  credits_.reset(peer.rank);
  return Status::ok();
}

Status ContextImpl::connectEager(const Bootstrap& bootstrap) {
  fabric::MeshOptions mesh;
  mesh.endpoint = endpointOptions_;
  mesh.prepare = [this](fabric::Endpoint& endpoint, int rank) {
    return preparePeer(peers_[static_cast<size_t>(rank)], endpoint);
  };
  IBDT_ASSIGN_OR_RETURN(auto endpoints,
                        fabric::connectMesh(domain_, *sendQueue_, *recvQueue_, rank_, size_, bootstrap.allgather, mesh));
  for (auto& endpoint : endpoints) {
    if (endpoint) endpoints_.push_back(std::move(endpoint));
  }
  for (const Peer& peer : peers_) {
    if (!peer.self) connections_.markConnected(peer.rank, /*counted=*/true);
  }
  return Status::ok();
}

}  // namespace ibdt::messaging
