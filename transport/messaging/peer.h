// transport/messaging/peer.h — one peer as the core sees it: its link
// (endpoints, the receive slots it writes into, the sends and READs we have
// outstanding to it), the queue of what waits to go to it, its failure, the
// pipelined message arriving from it and the layout caches of Section 4.4.2.
// The core's files reach a peer only through these methods.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "ibdt/fabric.h"
#include "ibdt/messaging.h"
#include "transport/messaging/control_queue.h"
#include "transport/messaging/layout_cache.h"
#include "transport/messaging/pipelined_inbound.h"
#include "transport/messaging/wire.h"

namespace ibdt::messaging {

class Peer {
 public:
  Peer(int rank, bool self) : rank_(rank), self_(self) {}

  int rank() const { return rank_; }
  bool self() const { return self_; }

  // The link. Another rank is reached through one endpoint both ways; to
  // reach itself a rank sends on one endpoint and receives on another.
  bool hasEndpoint() const { return sendEndpoint_ != nullptr; }
  fabric::Endpoint* sendEndpoint() const { return sendEndpoint_; }
  fabric::Endpoint* recvEndpoint() const { return recvEndpoint_; }
  void useEndpoint(fabric::Endpoint& endpoint) { sendEndpoint_ = recvEndpoint_ = &endpoint; }
  void useSelfPair(fabric::Endpoint& sender, fabric::Endpoint& receiver) {
    sendEndpoint_ = &sender;
    recvEndpoint_ = &receiver;
  }
  // `depth` receive slots of `slotSize` bytes, all posted.
  Status openSlots(fabric::Domain& domain, uint32_t depth, size_t slotSize);
  // Gives receive slot `slot` back to the peer to write into.
  Status repostSlot(uint32_t slot);
  // The message the peer wrote into `slot`, at most a slot long.
  std::span<const uint8_t> slotMessage(uint32_t slot, uint64_t length) const;
  // The work request id naming receive slot `slot` of this peer, and back.
  uint64_t slotWorkId(uint32_t slot) const;
  static uint32_t slotOf(uint64_t workId);

  // Sends and READs to the peer, counted until they complete so that the
  // send queue never overflows.
  Status postSend(const fabric::SendRequest& request);
  Status postChain(std::vector<fabric::SendRequest>& requests);  // emptied once posted
  Status postRead(const fabric::SendRequest& request);
  Status postPacked(const fabric::PackedSend& send) { return sendEndpoint_->postSendPacked(send); }
  void sendCompleted() {
    if (sendOutstanding_ > 0) --sendOutstanding_;
  }
  void readCompleted() {
    if (readsOutstanding_ > 0) --readsOutstanding_;
  }
  uint32_t sendsOutstanding() const { return sendOutstanding_; }
  // Sends that still fit in a send queue `depth` deep.
  uint32_t sendRoom(uint32_t depth) const { return depth - std::min(depth, sendOutstanding_); }
  bool sendFits(uint32_t depth, size_t more = 1) const { return sendOutstanding_ + more <= depth; }
  bool readRoom(uint32_t depth, uint32_t maxReads) const {
    return sendOutstanding_ < depth && readsOutstanding_ < maxReads;
  }

  // Control messages and eager sends, in order (control_queue.h).
  ControlQueue& control() { return control_; }
  const ControlQueue& control() const { return control_; }

  bool failed() const { return !failure_.isOk(); }
  const Status& failure() const { return failure_; }
  // Records the first failure; false if the peer had failed already.
  bool fail(Status status);

  // The pipelined eager message arriving from the peer (pipelined_inbound.h).
  PipelinedInbound& inbound() { return inbound_; }
  const PipelinedInbound& inbound() const { return inbound_; }

  // Section 4.4.2. Multi-W to a noncontiguous receiver: the receiver's
  // layout sent with its CTS or cached from an earlier one, checked to hold
  // the bytes it accepted.
  Result<datatype::Segment> receiverLayout(const wire::Cts& cts, std::span<const uint8_t> layout, Counters& counters);
  bool layoutCached(const datatype::Datatype& type) const { return layouts_.peerHolds(type); }
  void layoutSent(const datatype::Datatype& type) { layouts_.sentToPeer(type); }

 private:
  int rank_;
  bool self_;
  fabric::Endpoint* sendEndpoint_ = nullptr;
  fabric::Endpoint* recvEndpoint_ = nullptr;
  std::unique_ptr<fabric::MemoryRegion> recvSlots_;
  size_t slotSize_ = 0;
  uint32_t sendOutstanding_ = 0;
  uint32_t readsOutstanding_ = 0;  // P-RRS reads, within the provider's reads in flight
  ControlQueue control_;
  Status failure_;  // set once the endpoint broke
  PipelinedInbound inbound_;
  LayoutCache layouts_;
};

}  // namespace ibdt::messaging
