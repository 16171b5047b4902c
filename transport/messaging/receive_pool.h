// transport/messaging/receive_pool.h — the eager receive buffers of a Context
// whose endpoints share one receive queue (a verbs SRQ,
// transport/fabric/shared_receives.h).
//
// Under a shared queue a message from any peer lands in whichever posted
// buffer is at the queue's head, whoever's repost put it there, so a buffer
// belongs to no peer: it is named by its pool slot alone (the work request
// id), handled and reposted as such. The credit it consumed is still its
// sender's (the endpoint the completion names; CreditFlow). Buffers come in
// one chunk per endpoint readied (its peer's credits plus the reserve), so
// the posted buffers always cover the sum over the peers that can send of
// what each may have in flight: no SEND meets an empty queue, and memory
// grows with connected peers as per-peer buffers do (docs/many-ranks.md).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "ibdt/fabric.h"

namespace ibdt::messaging {

class ReceivePool {
 public:
  // Buffers of `slotSize` bytes, `chunkSlots` per endpoint readied.
  void enable(size_t slotSize, uint32_t chunkSlots);
  bool enabled() const { return chunkSlots_ != 0; }

  // Adds and posts one chunk through `endpoint` (any endpoint of the shared
  // queue; the first one is kept for reposts: the Context's own receiving
  // endpoint, which lives as long as the Context).
  Status grow(fabric::Domain& domain, fabric::Endpoint& endpoint);
  // Gives pool slot `slot` back to the shared queue.
  Status repost(uint32_t slot);
  // The message in pool slot `slot`, at most a slot long; empty for a slot
  // the pool does not have.
  std::span<const uint8_t> message(uint32_t slot, uint64_t length) const;
  uint32_t slots() const { return static_cast<uint32_t>(chunks_.size()) * chunkSlots_; }

  // The work request id naming pool slot `slot`, and back.
  static uint64_t workId(uint32_t slot);
  static bool names(uint64_t workId);
  static uint32_t slotOf(uint64_t workId);

 private:
  uint8_t* slotAddress(uint32_t slot) const;

  size_t slotSize_ = 0;
  uint32_t chunkSlots_ = 0;
  fabric::Endpoint* poster_ = nullptr;
  std::vector<std::unique_ptr<fabric::MemoryRegion>> chunks_;
};

}  // namespace ibdt::messaging
