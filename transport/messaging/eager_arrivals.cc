// Eager and pipelined eager messages arriving: matched against the posted
// receives or kept as unexpected, then handed to the eager receive steps
// (eager_receive.h) or to the peer's pipelined inbound message
// (pipelined_inbound.h). The unexpected budget is Matching's.
#include "transport/messaging/arrivals.h"
#include "transport/messaging/eager_receive.h"

namespace ibdt::messaging {

void Arrivals::handleEager(Peer& peer, const wire::Envelope& envelope, std::span<const uint8_t> payload) {
  std::shared_ptr<Operation> op;
  auto unexpected = parts_.matching.match(peer.rank(), envelope, &op);
  if (!unexpected.isOk()) {
    host_.failPeer(peer.rank(), unexpected.status());
    return;
  }
  if (op) {
    deliverEager(*op, parts_.types, peer.rank(), envelope, payload, Scheme::kEager);
    return;
  }
  // Unexpected: keep a copy, the receive buffer goes back to the peer.
  (*unexpected)->kind = wire::Kind::kEager;
  (*unexpected)->payload.assign(payload.begin(), payload.end());
  parts_.matching.hold(**unexpected, payload.size());
}

Status Arrivals::handlePipelined(Peer& peer, const wire::Envelope& envelope, std::span<const uint8_t> payload) {
  std::shared_ptr<Operation> op;
  IBDT_ASSIGN_OR_RETURN(Unexpected * unexpected, parts_.matching.match(peer.rank(), envelope, &op));
  if (unexpected != nullptr) {
    // Kept as it arrives; a receive posted meanwhile takes it over (adoptInbound).
    parts_.matching.hold(*unexpected, peer.inbound().startUnexpected(*unexpected, envelope, payload, options_.pipelineLimit));
    return Status::ok();
  }
  peer.inbound().startMatched(std::move(op), parts_.types, peer.rank(), envelope, payload);
  return Status::ok();
}

Status Arrivals::handleFragment(Peer& peer, const wire::Fragment& fragment, std::span<const uint8_t> payload) {
  Unexpected* unexpected = peer.inbound().unexpected();
  size_t held = 0;
  IBDT_RETURN_IF_ERROR(peer.inbound().onFragment(peer.rank(), fragment, payload, held));
  if (held > 0) parts_.matching.hold(*unexpected, held);
  return Status::ok();
}

void Arrivals::adoptInbound(std::shared_ptr<Operation> op, Unexpected& unexpected) {
  host_.peerAt(unexpected.peer).inbound().adopt(std::move(op), parts_.types, unexpected);
}

void Arrivals::dropInbound(Peer& peer) { parts_.matching.discard(peer.inbound().drop(peer.failure())); }

}  // namespace ibdt::messaging
