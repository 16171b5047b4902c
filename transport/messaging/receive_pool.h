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
//
// Under IBDT_MSG_EAGER_POOL (eager_pool.h) the same slots serve endpoints
// with receive queues of their own: a slot is taken from the free ones and
// posted to one peer's endpoint, and comes back free when the pool keeps it;
// at most `limit` slots ever exist, allocated a chunk at a time as needed.
#pragma once

#include <algorithm>
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

  // Free slots handed out one at a time, at most `limit` in all.
  void enableFreeSlots(size_t slotSize, uint32_t chunkSlots, uint64_t limit);
  bool handsOutSlots() const { return limit_ != 0; }
  // A free slot, allocating a chunk when none is left; kResourceExhausted
  // once `limit` slots are out.
  Result<uint32_t> take(fabric::Domain& domain);
  void giveBack(uint32_t slot) { free_.push_back(slot); }
  // Slots not out: free, or not yet allocated.
  uint64_t available() const { return limit_ - std::min<uint64_t>(slots(), limit_) + free_.size(); }
  // Posts pool slot `slot` to `endpoint`'s own receive queue.
  Status post(uint32_t slot, fabric::Endpoint& endpoint) const;

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
  Status allocateChunk(fabric::Domain& domain);

  size_t slotSize_ = 0;
  uint32_t chunkSlots_ = 0;
  fabric::Endpoint* poster_ = nullptr;
  std::vector<std::unique_ptr<fabric::MemoryRegion>> chunks_;
  uint64_t limit_ = 0;          // IBDT_MSG_EAGER_POOL: slots at most (0: one chunk per endpoint)
  std::vector<uint32_t> free_;  // IBDT_MSG_EAGER_POOL: allocated slots not posted
};

}  // namespace ibdt::messaging
