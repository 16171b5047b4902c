// Eager and pipelined eager messages arriving: matched against the posted
// receives or kept as unexpected, then handed to the eager receive steps
// (eager_receive.h) or to the peer's pipelined inbound message
// (pipelined_inbound.h). The unexpected budget is the core's.
#include "transport/messaging/context_impl.h"

namespace ibdt::messaging {

void ContextImpl::handleEager(Peer& peer, const wire::Envelope& envelope, std::span<const uint8_t> payload) {
  std::shared_ptr<Operation> op;
  auto unexpected = matching_.match(peer.rank, envelope, &op);
  if (!unexpected.isOk()) {
    failPeer(peer, unexpected.status());
    return;
  }
  if (op) {
    deliverEager(*op, types_, peer.rank, envelope, payload, Scheme::kEager);
    return;
  }
  // Unexpected: keep a copy, the receive buffer goes back to the peer.
  (*unexpected)->kind = wire::Kind::kEager;
  (*unexpected)->payload.assign(payload.begin(), payload.end());
  matching_.hold(**unexpected, payload.size());
}

Status ContextImpl::handlePipelined(Peer& peer, const wire::Envelope& envelope, std::span<const uint8_t> payload) {
  std::shared_ptr<Operation> op;
  IBDT_ASSIGN_OR_RETURN(Unexpected * unexpected, matching_.match(peer.rank, envelope, &op));
  if (unexpected != nullptr) {
    // Kept as it arrives; a receive posted meanwhile takes it over (adoptInbound).
    matching_.hold(*unexpected, peer.inbound.startUnexpected(*unexpected, envelope, payload, options_.pipelineLimit));
    return Status::ok();
  }
  peer.inbound.startMatched(std::move(op), types_, peer.rank, envelope, payload);
  return Status::ok();
}

Status ContextImpl::handleFragment(Peer& peer, const wire::Fragment& fragment, std::span<const uint8_t> payload) {
  Unexpected* unexpected = peer.inbound.unexpected();
  size_t held = 0;
  IBDT_RETURN_IF_ERROR(peer.inbound.onFragment(peer.rank, fragment, payload, held));
  if (held > 0) matching_.hold(*unexpected, held);
  return Status::ok();
}

void ContextImpl::adoptInbound(std::shared_ptr<Operation> op, Unexpected& unexpected) {
  peers_[static_cast<size_t>(unexpected.peer)].inbound.adopt(std::move(op), types_, unexpected);
}

void ContextImpl::dropInbound(Peer& peer) { matching_.discard(peer.inbound.drop(peer.failure)); }

}  // namespace ibdt::messaging
