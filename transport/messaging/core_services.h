// transport/messaging/core_services.h — the core's RendezvousServices
// (rendezvous_services.h), which the rendezvous sender and receiver and
// their protocol objects use: the buffer pool and dedicated buffers they
// stage in, the registration cache user buffers are registered through,
// control messages queued to a peer, and each peer's send queue, READs and
// layout caches (forwarded to Peer, peer.h).
#pragma once

#include <algorithm>
#include <memory>
#include <span>
#include <vector>

#include "ibdt/fabric.h"
#include "ibdt/messaging.h"
#include "transport/memory/buffer_pool.h"
#include "transport/memory/registration_cache.h"
#include "transport/messaging/active_peers.h"
#include "transport/messaging/context_limits.h"
#include "transport/messaging/credit_flow.h"
#include "transport/messaging/peer_table.h"
#include "transport/messaging/rendezvous_services.h"

namespace ibdt::messaging {

class CoreServices final : public RendezvousServices {
 public:
  struct Parts {  // the core's objects the services work with
    PeerTable& peers;
    CreditFlow& credits;
    ActivePeers& activePeers;
    Counters& counters;
    const ProviderLimits& limits;
    const Options& options;
  };
  CoreServices(Parts parts, fabric::Domain& domain) : parts_(parts), domain_(domain) {}

  void setRank(int rank) { rank_ = rank; }
  // The buffer pool (a few segments registered ahead) and the registration cache.
  Status createBuffers();
  memory::RegistrationCache& cache() { return *cache_; }
  uint64_t poolGrowths() const { return pool_->counters().growths; }

  // ProtocolServices (rendezvous_services.cc)
  Result<UserRegistration> registerUser(const Operation& op, int64_t bytes, uint32_t access, bool single) override;
  Result<Staging> pooledBuffer(size_t bytes, int keyForRank) override;
  Result<Staging> dedicatedBuffer(size_t bytes) override;
  bool creditFree(int rank) const override { return parts_.credits.available(rank) > 0; }
  void queueControl(int rank, std::vector<uint8_t> bytes) override;
  Result<datatype::Segment> receiverLayout(int rank, const wire::Cts& cts, std::span<const uint8_t> layout) override {
    return peer(rank).receiverLayout(cts, layout, parts_.counters);
  }
  bool layoutCached(int rank, const datatype::Datatype& type) const override { return peer(rank).layoutCached(type); }
  void layoutSent(int rank, const datatype::Datatype& type) override {
    peer(rank).layoutSent(type);
    ++parts_.counters.layoutsSent;
  }
  size_t controlCapacity() const override { return eagerSlotSize(parts_.options); }

  // RendezvousServices
  int selfRank() const override { return rank_; }
  uint64_t maxWriteBytes() const override { return parts_.limits.maxWrBytes; }
  uint32_t maxSgePerRequest() const override { return parts_.limits.maxSge; }
  uint32_t sendQueueDepth() const override { return parts_.limits.sendQueueDepth; }
  uint32_t sendRoom(int rank) const override { return peer(rank).sendRoom(parts_.limits.sendQueueDepth); }
  bool readRoom(int rank) const override {
    return peer(rank).readRoom(parts_.limits.sendQueueDepth, std::max<uint32_t>(1, domain_.caps().maxReadsInFlight));
  }
  Status postWrites(int rank, std::vector<fabric::SendRequest>& requests) override {
    return peer(rank).postChain(requests);
  }
  Status postRead(int rank, const fabric::SendRequest& request) override { return peer(rank).postRead(request); }
  void spendCredit(int rank) override { parts_.credits.spend(rank); }
  void wake(int rank) override { parts_.activePeers.mark(rank); }

 private:
  Peer& peer(int rank) { return parts_.peers.peer(rank); }
  const Peer& peer(int rank) const { return parts_.peers.peer(rank); }

  Parts parts_;
  fabric::Domain& domain_;
  int rank_ = 0;
  std::unique_ptr<memory::BufferPool> pool_;
  std::unique_ptr<memory::RegistrationCache> cache_;
  memory::GroupPlanOptions groupPlan_;
};

}  // namespace ibdt::messaging
