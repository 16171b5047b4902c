// The peers and the endpoints that reach them (peer_table.h).
#include "transport/messaging/peer_table.h"

#include "transport/fabric/shared_receives.h"

namespace ibdt::messaging {

Status PeerTable::init(int rank, int size, const ProviderLimits& limits, Prepare prepare) {
  rank_ = rank;
  size_ = size;
  prepare_ = std::move(prepare);
  peers_.reserve(static_cast<size_t>(size));
  for (int p = 0; p < size; ++p) peers_.emplace_back(p, p == rank);
  auto ranks = static_cast<uint32_t>(size + 1);
  IBDT_ASSIGN_OR_RETURN(sendQueue_, domain_.createCompletionQueue(ranks * limits.sendQueueDepth));
  IBDT_ASSIGN_OR_RETURN(recvQueue_, domain_.createCompletionQueue(ranks * limits.recvDepth));
  if (limits.sharedReceiveDepth != 0) {
    IBDT_RETURN_IF_ERROR(fabric::shareReceives(domain_, *recvQueue_, limits.sharedReceiveDepth));
  }
  endpointOptions_.sendQueueDepth = limits.sendQueueDepth;
  endpointOptions_.recvQueueDepth = limits.recvDepth;
  endpointOptions_.maxInline = domain_.caps().maxInline;  // small control messages go inline
  return Status::ok();
}

Status PeerTable::connectSelf() {
  // To reach itself a rank connects a pair of its own endpoints.
  Peer& self = peer(rank_);
  IBDT_ASSIGN_OR_RETURN(fabric::Endpoint * sender, createEndpoint(self));
  endpointRank_.set(sender->id(), rank_);
  IBDT_ASSIGN_OR_RETURN(auto receiver, domain_.createEndpoint(*sendQueue_, *recvQueue_, endpointOptions_));
  receiver->setPeerLabel(strCat("rank ", rank_, " (self)"));
  endpointRank_.set(receiver->id(), rank_);
  self.useSelfPair(*sender, *receiver);
  endpoints_.push_back(std::move(receiver));
  IBDT_RETURN_IF_ERROR(sender->connect(self.recvEndpoint()->address()));
  IBDT_RETURN_IF_ERROR(self.recvEndpoint()->connect(sender->address()));
  return prepare_(self, *self.recvEndpoint());
}

Status PeerTable::connectMesh(const Bootstrap& bootstrap) {
  fabric::MeshOptions mesh;
  mesh.endpoint = endpointOptions_;
  mesh.prepare = [this](fabric::Endpoint& endpoint, int rank) { return prepare_(peer(rank), endpoint); };
  IBDT_ASSIGN_OR_RETURN(auto endpoints, fabric::connectMesh(domain_, *sendQueue_, *recvQueue_, rank_, size_,
                                                            bootstrap.allgather, mesh));
  for (auto& endpoint : endpoints) {
    if (endpoint) endpoints_.push_back(std::move(endpoint));
  }
  return Status::ok();
}

// A lazy link's endpoint: one per peer, kept across failed requests so that
// bad requests cost nothing per datagram.
Result<fabric::Endpoint*> PeerTable::endpointTo(int rank) {
  Peer& peer = this->peer(rank);
  if (peer.hasEndpoint()) return peer.sendEndpoint();
  IBDT_ASSIGN_OR_RETURN(fabric::Endpoint * endpoint, createEndpoint(peer));
  IBDT_RETURN_IF_ERROR(prepare_(peer, *endpoint));
  return endpoint;
}

void PeerTable::attach(Peer& peer, fabric::Endpoint& endpoint) {
  if (!peer.self()) peer.useEndpoint(endpoint);
  endpointRank_.set(endpoint.id(), peer.rank());
}

Result<fabric::Endpoint*> PeerTable::createEndpoint(const Peer& peer) {
  auto endpoint = domain_.createEndpoint(*sendQueue_, *recvQueue_, endpointOptions_);
  if (!endpoint.isOk()) return std::move(endpoint).takeStatus().withContext(strCat("endpoint to rank ", peer.rank()));
  (*endpoint)->setPeerLabel(strCat("rank ", peer.rank()));
  endpoints_.push_back(std::move(endpoint).value());
  return endpoints_.back().get();
}

}  // namespace ibdt::messaging
