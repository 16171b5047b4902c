// transport/messaging/peer_table.h — every peer of a Context (peer.h) and
// the fabric objects that reach them: the two completion queues all
// endpoints share, the endpoints (one per peer, a pair to ourselves) and
// which rank each endpoint's completions belong to. When an endpoint comes
// up is Connections' (connections.h): eagerly as a mesh at start, or
// lazily on first use.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "ibdt/fabric.h"
#include "ibdt/messaging.h"
#include "transport/fabric/mesh.h"
#include "transport/messaging/context_limits.h"
#include "transport/messaging/endpoint_ranks.h"
#include "transport/messaging/peer.h"

namespace ibdt::messaging {

class PeerTable {
 public:
  // Readies a new endpoint to `peer` before anyone can send to it.
  using Prepare = std::function<Status(Peer& peer, fabric::Endpoint& endpoint)>;

  explicit PeerTable(fabric::Domain& domain) : domain_(domain) {}

  // The peers of rank `rank` of `size` and the completion queues for them
  // within `limits` (with a shared receive queue if it says so);
  // `prepare` readies every endpoint created later.
  Status init(int rank, int size, const ProviderLimits& limits, Prepare prepare);
  // The pair of endpoints to ourselves, connected and readied.
  Status connectSelf();
  // Every other rank's endpoint, at once (fabric/mesh.h).
  Status connectMesh(const Bootstrap& bootstrap);
  // The endpoint to `rank`, created (and readied) on first use.
  Result<fabric::Endpoint*> endpointTo(int rank);
  // Makes `endpoint` `peer`'s: its completions are found as that peer's.
  // (Its receive buffers are posted by the Context: the peer's own, or the
  // shared pool's.)
  void attach(Peer& peer, fabric::Endpoint& endpoint);

  Peer& peer(int rank) { return peers_[static_cast<size_t>(rank)]; }
  const Peer& peer(int rank) const { return peers_[static_cast<size_t>(rank)]; }
  // The peer whose endpoint `endpointId` is; null for an unknown one.
  Peer* find(uint64_t endpointId) {
    const int* rank = endpointRank_.find(endpointId);
    return rank != nullptr ? &peer(*rank) : nullptr;
  }
  auto begin() { return peers_.begin(); }
  auto end() { return peers_.end(); }
  auto begin() const { return peers_.begin(); }
  auto end() const { return peers_.end(); }

  fabric::CompletionQueue& sendQueue() { return *sendQueue_; }
  fabric::CompletionQueue& recvQueue() { return *recvQueue_; }

 private:
  Result<fabric::Endpoint*> createEndpoint(const Peer& peer);

  fabric::Domain& domain_;
  int rank_ = 0;
  int size_ = 1;
  Prepare prepare_;
  std::unique_ptr<fabric::CompletionQueue> sendQueue_;
  std::unique_ptr<fabric::CompletionQueue> recvQueue_;
  fabric::EndpointOptions endpointOptions_;
  std::vector<std::unique_ptr<fabric::Endpoint>> endpoints_;
  EndpointRanks endpointRank_;
  std::vector<Peer> peers_;
};

}  // namespace ibdt::messaging
