// The core's RendezvousServices (rendezvous_services.h): control messages,
// the layout caches of Section 4.4.2, and READs within a peer's limits.
#include <algorithm>

#include "transport/messaging/context_impl.h"

namespace ibdt::messaging {
namespace {

// A receiver layout (or count) from the peer that does not decode: its
// fault whatever the datatype layer calls it.
Status unusableLayout(int rank, const wire::Cts& cts, const Status& why) {
  return makeError(Code::kProtocol, "rank ", rank, " sent an unusable layout (count ", cts.count, ") for transfer ",
                   cts.senderTransfer, ": ", why.toString());
}

}  // namespace

void ContextImpl::queueControl(int rank, std::vector<uint8_t> bytes) {
  peers_[static_cast<size_t>(rank)].control.push(ControlMessage(std::move(bytes)));
  activePeers_.mark(rank);
}

// Multi-W to a noncontiguous receiver: its layout sent with this reply or
// cached from an earlier one.
Result<datatype::Segment> ContextImpl::receiverLayout(int rank, const wire::Cts& cts, std::span<const uint8_t> layout) {
  LayoutCache& layouts = peers_[static_cast<size_t>(rank)].layouts;
  const datatype::Datatype* receiverType = layouts.received(cts.typeId, cts.typeVersion);
  if (!layout.empty()) {
    auto type = datatype::deserialize(layout);
    if (!type.isOk()) return unusableLayout(rank, cts, type.status());
    receiverType = &layouts.store(cts.typeId, cts.typeVersion, std::move(type).value());
  } else if (receiverType == nullptr) {
    return makeError(Code::kProtocol, "rank ", rank, " refers to layout (", cts.typeId, ", ", cts.typeVersion,
                     ") it never sent, for transfer ", cts.senderTransfer);
  } else {
    ++counters_.layoutCacheHits;
  }
  auto segment = datatype::Segment::create(*receiverType, cts.count);
  if (!segment.isOk()) return unusableLayout(rank, cts, segment.status());
  if (segment->size() < cts.bytes) {
    return makeError(Code::kProtocol, "rank ", rank, "'s layout holds ", segment->size(), " bytes, it accepted ",
                     cts.bytes, " for transfer ", cts.senderTransfer);
  }
  return segment;
}

bool ContextImpl::layoutCached(int rank, const datatype::Datatype& type) const {
  return peers_[static_cast<size_t>(rank)].layouts.peerHolds(type);
}

void ContextImpl::layoutSent(int rank, const datatype::Datatype& type) {
  peers_[static_cast<size_t>(rank)].layouts.sentToPeer(type);
  ++counters_.layoutsSent;
}

bool ContextImpl::readRoom(int rank) const {
  const Peer& peer = peers_[static_cast<size_t>(rank)];
  uint32_t maxReads = std::max<uint32_t>(1, domain_.caps().maxReadsInFlight);
  return peer.sendOutstanding < sendQueueDepth_ && peer.readsOutstanding < maxReads;
}

Status ContextImpl::postRead(int rank, const fabric::SendRequest& request) {
  Peer& peer = peers_[static_cast<size_t>(rank)];
  IBDT_RETURN_IF_ERROR(peer.sendEndpoint->postSend(request));
  ++peer.sendOutstanding;
  ++peer.readsOutstanding;
  return Status::ok();
}

}  // namespace ibdt::messaging
