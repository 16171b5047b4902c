// transport/messaging/eager_pool.h — IBDT_MSG_EAGER_POOL: who holds how many
// of a rank's eager receive buffers (docs/many-ranks.md, "The shared eager
// pool").
//
// The buffers are one pool of the Context (ReceivePool's free slots, at most
// IBDT_MSG_EAGER_MEMORY of them). Each peer holds `guaranteed` credits (and
// the reserve) for good; the rest of the pool goes to peers that ask for it.
// A peer asks by setting wire::kWantsCredits in its headers while it has more
// queued for us than credits. Every time a buffer that consumed one of its
// credits is reposted, EagerPool decides what becomes of it:
//   * returned to the peer (a credit, as without the pool), plus up to as
//     many again from the pool while it asks (a grant, owed like any credit);
//   * kept in the pool (the peer's credits shrink by one), when it gave it
//     back (wire::Kind::kGiveBack), or others ask while it no longer does
//     or holds more than its fair share. Nobody asking, a peer keeps what it
//     was granted: within the budget, and ready for its next burst.
// Credits a peer holds but does not use come back only through it: when a
// grant finds the pool empty, peers holding more than the guaranteed share
// that do not ask are sent wire::kReclaim (with the next message that goes
// to them anyway; once until they send again), and give back what they hold
// beyond it when they have nothing queued for us. A peer never drops below
// `guaranteed`, so each peer keeps the credits of the flow control without
// the pool. Grants and kReclaim never make a credit-only message due by
// themselves (CreditFlow::creditBatch), so the reserve buffers hold every
// credit-only message as without the pool (docs/many-ranks.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ibdt::messaging {

class EagerPool {
 public:
  // `extraSlots`: buffers beyond every endpoint's guaranteed share and reserve.
  void init(int ranks, uint32_t guaranteed, uint32_t ceiling, uint64_t extraSlots);
  bool enabled() const { return ceiling_ != 0; }
  uint32_t guaranteed() const { return guaranteed_; }
  uint32_t ceiling() const { return ceiling_; }

  // Credits `rank` holds in all (free at it, in flight, consumed here and not
  // yet returned).
  uint32_t granted(int rank) const { return peer(rank).granted; }
  // The link to `rank` is up with its guaranteed share posted.
  void open(int rank);
  // A header from `rank` said whether it waits for credits.
  void heard(int rank, bool wantsCredits);

  struct Decision {
    bool retain = false;  // the buffer goes to the pool: no credit back
    uint32_t grant = 0;   // pool buffers to post to the peer besides (more credits)
  };
  // A buffer that consumed a credit of `rank` is reposted; `givenBack`: its
  // message was a kGiveBack; `freeSlots`: buffers in the pool now.
  Decision decide(int rank, bool givenBack, uint64_t freeSlots);
  // `count` of a decided grant could not be posted (the pool ran dry).
  void ungrant(int rank, uint32_t count) { peer(rank).granted -= count; }

  // Reclaim: peers to send wire::kReclaim to, once each until they send again.
  bool reclaimDue(int rank) const { return peer(rank).reclaimDue; }
  void reclaimSent(int rank) { peer(rank).reclaimDue = false; }
  // Ranks asked by the last decide() (to be visited by progress).
  const std::vector<int>& newlyAsked() const { return asked_; }

 private:
  struct PeerShare {
    uint32_t granted = 0;
    bool wants = false;         // its last header carried kWantsCredits
    bool reclaimDue = false;    // kReclaim goes with our next message to it
    bool reclaimAsked = false;  // asked, and nothing heard from it since
  };
  PeerShare& peer(int rank) { return peers_[static_cast<size_t>(rank)]; }
  const PeerShare& peer(int rank) const { return peers_[static_cast<size_t>(rank)]; }
  // Credits a peer that asks may grow to while `wanting_` peers ask.
  uint32_t fairShare() const;
  // Asks the peers that hold more than the guaranteed share without asking.
  void askHolders(int except);

  uint32_t guaranteed_ = 0;
  uint32_t ceiling_ = 0;
  uint64_t extraSlots_ = 0;
  uint32_t wanting_ = 0;  // peers whose last header asked
  std::vector<PeerShare> peers_;
  std::vector<int> asked_;
};

}  // namespace ibdt::messaging
