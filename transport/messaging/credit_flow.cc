// Credit flow control (credit_flow.h): who may send how much, and when our
// consumed receive buffers go back to their senders.
#include "transport/messaging/credit_flow.h"

namespace ibdt::messaging {

void CreditFlow::init(int ranks, int self, uint32_t eagerCredits) {
  eagerCredits_ = eagerCredits;
  self_ = self;
  peers_.assign(static_cast<size_t>(ranks), PeerCredits{});
}

void CreditFlow::enablePool(uint32_t ceiling, uint64_t extraBuffers) {
  pool_.init(static_cast<int>(peers_.size()), eagerCredits_, ceiling, extraBuffers);
}

void CreditFlow::reset(int rank) {
  PeerCredits& credits = peer(rank);
  credits.credits = eagerCredits_;
  credits.owed = credits.owedGrants = 0;
  credits.stalled = credits.giveBackAsked = false;
  if (pool_.enabled()) pool_.open(rank);
}

wire::Header CreditFlow::header(int rank, wire::Kind kind, bool backlogged) const {
  wire::Header header{kind, 0, {}, owedTo(rank)};
  if (pool_.enabled() && rank != self_) {
    if (peer(rank).stalled || backlogged) header.flags |= wire::kWantsCredits;
    if (pool_.reclaimDue(rank)) header.flags |= wire::kReclaim;
  }
  return header;
}

bool CreditFlow::creditMessageDue(int rank) const {
  if (!due(rank)) return false;
  if (pool_.enabled()) return true;  // its credit messages carry grants: they go at once
  const PeerCredits& credits = peer(rank);
  const uint32_t owed = returnsOwed(rank);
  const uint32_t fresh = credits.freshEpoch == progressEpoch_ ? std::min(credits.fresh, owed) : 0;
  if (owed - fresh >= creditBatch(rank)) return true;
  return owed >= eagerCredits_;
}

void CreditFlow::sent(int rank, bool spendsCredit) {
  PeerCredits& credits = peer(rank);
  if (rank != self_) {
    credits.owed = credits.owedGrants = 0;
    credits.stalled = false;
    if (pool_.enabled()) pool_.reclaimSent(rank);
  }
  if (spendsCredit) --credits.credits;
}

Status CreditFlow::returned(int rank, const wire::Header& header) {
  PeerCredits& state = peer(rank);
  const uint32_t most = pool_.enabled() ? pool_.ceiling() : eagerCredits_;
  if (header.credits > most - state.credits) {
    return makeError(Code::kProtocol, "rank ", rank, " returned ", header.credits, " credits, ", state.credits,
                     " of ", most, " are already free");
  }
  if (header.flags != 0 && (!pool_.enabled() || (header.flags & ~wire::kKnownFlags) != 0)) {
    return makeError(Code::kProtocol, "rank ", rank, " sent header flags ", int{header.flags},
                     pool_.enabled() ? "" : " without IBDT_MSG_EAGER_POOL on our side");
  }
  state.credits += header.credits;
  if (pool_.enabled() && rank != self_) {
    pool_.heard(rank, (header.flags & wire::kWantsCredits) != 0);
    if ((header.flags & wire::kReclaim) != 0) state.giveBackAsked = true;
  }
  return Status::ok();
}

uint32_t CreditFlow::surplusAsked(int rank) const {
  const PeerCredits& state = peer(rank);
  return state.giveBackAsked && state.credits > eagerCredits_ ? state.credits - eagerCredits_ : 0;
}

void CreditFlow::consumed(Host& host, int rank, uint64_t buffer, Use use) {
  // Over the budget a sender's credits are not returned: it stops at the
  // buffers it has and waits. Ourselves excepted (we would wait on
  // ourselves), and a sender a posted receive waits for (its message may be
  // behind the ones held: withholding would deadlock a valid program).
  bool withhold = use == Use::kCredit && rank != self_ && host.mayWithhold(rank);
  (withhold ? withheld_ : consumed_).push_back(ConsumedSlot{rank, buffer, use});
  if (withhold) ++counters_.creditsWithheld;
  if (use != Use::kReserve) ++peer(rank).unposted;
}

void CreditFlow::releaseWithheld(const Host& host) {
  if (withheld_.empty()) return;
  auto kept = withheld_.begin();
  for (const ConsumedSlot& slot : withheld_) {
    if (!host.mayWithhold(slot.rank)) {
      consumed_.push_back(slot);
    } else {
      *kept++ = slot;
    }
  }
  withheld_.erase(kept, withheld_.end());
}

void CreditFlow::repostConsumed(Host& host, bool dueOnly) {
  auto kept = consumed_.begin();
  for (const ConsumedSlot& consumed : consumed_) {
    const PeerCredits& credits = peer(consumed.rank);
    bool self = consumed.rank == self_;
    if (dueOnly && (self || returnsOwed(consumed.rank) + credits.unposted < earlyRepostAt(consumed.rank))) {
      *kept++ = consumed;
      continue;
    }
    repost(host, consumed);
  }
  consumed_.erase(kept, consumed_.end());
}

bool CreditFlow::repost(Host& host, const ConsumedSlot& consumed) {
  const int rank = consumed.rank;
  PeerCredits& credits = peer(rank);
  const bool countsCredit = consumed.use != Use::kReserve;
  if (countsCredit) --credits.unposted;
  EagerPool::Decision decision;
  if (countsCredit && rank != self_ && pool_.enabled() && !host.peerFailed(rank)) {
    decision = pool_.decide(rank, consumed.use == Use::kGiveBack, host.grantableBuffers());
    for (int asked : pool_.newlyAsked()) host.wake(asked);
  }
  if (decision.retain) {
    host.keepBuffer(consumed.buffer);
    ++counters_.creditsTakenBack;
    // Its credit batch (half its grant) just shrank: credits owed to it
    // that were below the old batch may be due now, and nothing else will
    // visit it (its last repost's visit found them not due).
    host.wake(rank);
    return true;
  }
  Status status = host.repostBuffer(rank, consumed.buffer);
  if (!status.isOk()) {
    host.failPeer(rank, status);
    return false;
  }
  if (host.peerFailed(rank)) return false;  // nothing is owed to a failed sender
  if (countsCredit) {
    if (rank == self_) {
      ++credits.credits;
    } else {
      ++credits.owed;
      if (credits.freshEpoch != progressEpoch_) credits.fresh = 0;
      credits.freshEpoch = progressEpoch_;
      ++credits.fresh;
    }
  }
  if (decision.grant > 0) grant(host, rank, decision.grant);
  return true;
}

void CreditFlow::grant(Host& host, int rank, uint32_t count) {
  uint32_t posted = 0;
  for (; posted < count; ++posted) {
    Result<bool> granted = host.grantBuffer(rank);
    if (!granted.isOk()) {
      host.failPeer(rank, granted.status());
      break;
    }
    if (!*granted) break;
  }
  pool_.ungrant(rank, count - posted);
  peer(rank).owed += posted;
  peer(rank).owedGrants += posted;
  counters_.creditsGranted += posted;
}

}  // namespace ibdt::messaging
