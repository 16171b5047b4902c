// transport/messaging/credit_flow.h — eager-buffer credit flow control.
//
// Each peer has eagerCredits receive buffers for us (plus kReserveSlots that
// only credit-only messages use). Every message but those consumes a credit;
// the receiver reposts the buffer and reports it in the next header it sends,
// or in a credit-only message once creditBatch() are owed. CreditFlow is the
// single owner of that state: credits free at each peer, credits we owe,
// buffers consumed but not yet reposted, and buffers withheld while the
// unexpected-message budget is exceeded (docs/design.md, messaging). Under
// IBDT_MSG_EAGER_POOL the credits per peer vary: EagerPool (eager_pool.h)
// decides at each repost whether the buffer goes back to its sender, comes
// with more, or stays in the pool.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "ibdt/messaging.h"
#include "ibdt/status.h"
#include "transport/messaging/eager_pool.h"
#include "transport/messaging/wire.h"

namespace ibdt::messaging {

class CreditFlow {
 public:
  static constexpr uint32_t kReserveSlots = 4;  // receive buffers for credit-only messages

  // What CreditFlow needs from the core: reposting a receive buffer, the
  // state of a peer, and whether its buffers may be withheld.
  class Host {
   public:
    virtual ~Host() = default;
    // Gives receive buffer `buffer` (the work request id that named it: a
    // slot of `sender`'s own, or of the shared pool) back to the provider. A
    // failed sender's own buffers are flushed or gone; a pool buffer goes back
    // whoever sent into it.
    virtual Status repostBuffer(int sender, uint64_t buffer) = 0;
    virtual bool peerFailed(int rank) const = 0;
    virtual void failPeer(int rank, Status status) = 0;
    // Over the unexpected budget, and no posted receive waits for `rank`.
    virtual bool mayWithhold(int rank) const = 0;
    // IBDT_MSG_EAGER_POOL (a host without it keeps these): pool buffers that
    // may be granted now; posting one more of them to `rank` (false: none
    // left); keeping `buffer` in the pool; `rank` has something to send (a
    // kReclaim).
    virtual uint64_t grantableBuffers() const { return 0; }
    virtual Result<bool> grantBuffer(int /*rank*/) { return false; }
    virtual void keepBuffer(uint64_t /*buffer*/) {}
    virtual void wake(int /*rank*/) {}
  };
  // What a received message did with its buffer.
  enum class Use : uint8_t {
    kReserve,   // credit-only, close, or a failed receive: no credit
    kCredit,    // consumed a credit
    kGiveBack,  // consumed a credit its sender gives back to the pool
  };

  explicit CreditFlow(Counters& counters) : counters_(counters) {}
  // `eagerCredits` per peer: IBDT_MSG_CREDITS within the eager memory budget
  // (eager_budget.h), the same on every rank.
  void init(int ranks, int self, uint32_t eagerCredits);
  // IBDT_MSG_EAGER_POOL: eagerCredits is each peer's guaranteed share, a peer
  // may be granted up to `ceiling`, out of `extraBuffers` beyond the shares.
  void enablePool(uint32_t ceiling, uint64_t extraBuffers);
  const EagerPool& pool() const { return pool_; }

  // The link to `rank` is up: all its buffers for us are free, we owe none.
  void reset(int rank);

  // Sending: credits free at `rank`, and what we owe it (0 to ourselves).
  uint32_t available(int rank) const { return peer(rank).credits; }
  uint32_t owedTo(int rank) const { return rank == self_ ? 0 : peer(rank).owed; }
  // The header of a message of `kind` to `rank`: what we owe it, and the
  // pool's flags; `backlogged`: more waits for it than its credits cover.
  wire::Header header(int rank, wire::Kind kind, bool backlogged) const;
  // A message to `rank` left with header(rank); `spendsCredit` unless it
  // went to a reserve buffer (credit-only).
  void sent(int rank, bool spendsCredit);
  // Messages to `rank` wait for credits.
  void stalled(int rank) { peer(rank).stalled = pool_.enabled(); }
  // An immediate of a rendezvous write consumed one of `rank`'s buffers.
  void spend(int rank) { --peer(rank).credits; }
  // The header of a message from `rank`: the credits it returns (more than it
  // could owe is a protocol error) and its flags.
  Status returned(int rank, const wire::Header& header);
  // Credits `rank` asked back (kReclaim) that we may give back now (beyond
  // the guaranteed share), and that a kGiveBack went.
  uint32_t surplusAsked(int rank) const;
  bool giveBackAsked(int rank) const { return peer(rank).giveBackAsked; }
  void giveBackDone(int rank) { peer(rank).giveBackAsked = false; }
  void gaveBack() { ++counters_.creditsGivenBack; }

  // Returned credits that are sent back on their own, without waiting for
  // a message to carry them: half the peer's credits, and at least 2 from 3
  // credits up: in a ping-pong one credit is always owed, reposted after
  // the reply left and carried by the next (earlyRepostAt), and a batch of
  // one sent it alone from the rank waiting for that next message. Under
  // the pool, half (rounded up) of those it knows of: grants not yet sent do not count,
  // and do not make a credit-only message due by themselves. So each
  // credit-only message returns at least half of what its receiver can
  // have spent, and at most two are in flight, as with constant credits
  // (docs/many-ranks.md, the shared eager pool, point 6); grants travel with them.
  uint32_t creditBatch(int rank) const {
    if (!pool_.enabled()) return eagerCredits_ <= 2 ? 1 : std::max<uint32_t>(2, eagerCredits_ / 2);
    return std::max<uint32_t>(1, (pool_.granted(rank) - peer(rank).owedGrants + 1) / 2);
  }
  // `rank` is owed enough credits to be told in a message of its own (a
  // kReclaim only rides on messages that go anyway: it never makes one due).
  bool due(int rank) const { return rank != self_ && returnsOwed(rank) >= creditBatch(rank); }
  // Due, and worth a message now. Credits owed since this progress call
  // began wait for the next one unless they are all `rank` can have: the
  // caller is likely acting on the message that freed them (replying, in a
  // ping-pong), and the reply carries them. At 2 or 3 credits per peer (the
  // eager budget's floor at many ranks) the batch is one credit, and sending
  // it at once doubled a ping-pong's messages. Under the pool a credit
  // message carries grants too, and goes at once.
  bool creditMessageDue(int rank) const;
  void creditMessageSent() { ++counters_.creditMessages; }
  // A progress call begins: credits owed before it are no longer fresh.
  void beginProgress() { ++progressEpoch_; }

  // Receiving: a message from `rank` in receive buffer `buffer` (its work
  // request id) was handled. Two identities: the credit is `rank`'s, the
  // buffer is whichever the provider filled (under a shared receive queue
  // one of any rank's reposts).
  void consumed(Host& host, int rank, uint64_t buffer, Use use);
  // Reposts the consumed buffers; their credits become owed (or, to
  // ourselves, free) only then. `dueOnly`: only those of peers owed a credit
  // message with them.
  void repostConsumed(Host& host, bool dueOnly);
  // Moves withheld buffers whose sender may no longer be held back to the
  // consumed list (reposted by the next repostConsumed).
  void releaseWithheld(const Host& host);

 private:
  struct PeerCredits {
    uint32_t credits = 0;   // eager buffers free at the peer
    uint32_t owed = 0;      // our buffers consumed and reposted, not yet reported
    uint32_t owedGrants = 0;  // pool: of `owed`, pool buffers granted (not returned)
    uint32_t unposted = 0;  // our buffers consumed, not yet reposted
    bool stalled = false;        // pool: messages waited for credits since the last left
    bool giveBackAsked = false;  // pool: it sent kReclaim
    uint32_t fresh = 0;          // of `owed`, reposted during progress call `freshEpoch`
    uint64_t freshEpoch = 0;
  };
  // A receive buffer whose message was handled. Reposting is deferred to the
  // start of the next progress(): a repost ends by waking the peer (a fence
  // that waits for the posting stores to reach the peer's cache), and
  // deferred, that cost falls after the caller has acted on the message —
  // sent its reply — instead of before. A peer that reaches creditBatch()
  // with them is reposted for and sent its credits in the same call: it may
  // be waiting for them while we wait for nothing from it.
  struct ConsumedSlot {
    int rank;         // the sender, whose credit it is
    uint64_t buffer;  // the work request id naming the buffer
    Use use;
  };
  // Reposts one consumed buffer (or keeps it in the pool) and owes its
  // credit and any granted with it; false if the sender failed on it.
  bool repost(Host& host, const ConsumedSlot& consumed);
  // Posts `count` pool buffers to `rank` as new credits owed to it.
  void grant(Host& host, int rank, uint32_t count);

  // Buffers of `rank` consumed or owed from which the ones just consumed are
  // reposted in the progress call that received them rather than at the
  // start of the next (where they are fresh: creditMessageDue). In a
  // ping-pong the caller answers each message, and 2 are outstanding when
  // it does (one reposted, owed to the reply; one just consumed): reposting
  // the second first (its stores, a fence, the peer's doorbell line) came
  // between the message and its reply. Hence at least 3 (at 3 credits: all
  // the peer has, so a stalled peer still gets them in this call). At 2
  // credits per peer (the floor, from about 170 ranks by default) both are
  // all the peer has: the buffer is reposted at once, as before, so that
  // the reply carries it rather than a credit-only message.
  uint32_t earlyRepostAt(int rank) const {
    if (pool_.enabled() || eagerCredits_ <= 2) return creditBatch(rank);
    return std::max<uint32_t>(creditBatch(rank), 3);
  }
  // Credits owed for buffers `rank` consumed (owed less grants).
  uint32_t returnsOwed(int rank) const { return peer(rank).owed - peer(rank).owedGrants; }
  PeerCredits& peer(int rank) { return peers_[static_cast<size_t>(rank)]; }
  const PeerCredits& peer(int rank) const { return peers_[static_cast<size_t>(rank)]; }

  uint32_t eagerCredits_ = 0;
  uint64_t progressEpoch_ = 1;
  Counters& counters_;
  EagerPool pool_;
  int self_ = 0;
  std::vector<PeerCredits> peers_;
  std::vector<ConsumedSlot> consumed_;
  std::vector<ConsumedSlot> withheld_;  // consumed while over the unexpected budget
};

}  // namespace ibdt::messaging
