// Credit flow control (credit_flow.h): who may send how much, and when our
// consumed receive buffers go back to their senders.
#include "transport/messaging/credit_flow.h"

namespace ibdt::messaging {

void CreditFlow::init(int ranks, int self, uint32_t eagerCredits) {
  eagerCredits_ = eagerCredits;
  self_ = self;
  peers_.assign(static_cast<size_t>(ranks), PeerCredits{});
}

void CreditFlow::reset(int rank) {
  peer(rank).credits = eagerCredits_;
  peer(rank).owed = 0;
}

void CreditFlow::sent(int rank, bool spendsCredit) {
  PeerCredits& credits = peer(rank);
  if (rank != self_) credits.owed = 0;
  if (spendsCredit) --credits.credits;
}

Status CreditFlow::returned(int rank, uint32_t credits) {
  PeerCredits& state = peer(rank);
  if (credits > eagerCredits_ - state.credits) {
    return makeError(Code::kProtocol, "rank ", rank, " returned ", credits, " credits, ", state.credits, " of ",
                     eagerCredits_, " are already free");
  }
  state.credits += credits;
  return Status::ok();
}

void CreditFlow::consumed(Host& host, int rank, uint64_t buffer, bool countsCredit) {
  // Over the budget a sender's credits are not returned: it stops at the
  // buffers it has and waits. Ourselves excepted (we would wait on
  // ourselves), and a sender a posted receive waits for (its message may be
  // behind the ones held: withholding would deadlock a valid program).
  bool withhold = countsCredit && rank != self_ && host.mayWithhold(rank);
  (withhold ? withheld_ : consumed_).push_back(ConsumedSlot{rank, buffer, countsCredit});
  if (withhold) ++counters_.creditsWithheld;
  if (countsCredit) ++peer(rank).unposted;
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
    PeerCredits& credits = peer(consumed.rank);
    bool self = consumed.rank == self_;
    if (dueOnly && (self || credits.owed + credits.unposted < creditBatch())) {
      *kept++ = consumed;
      continue;
    }
    if (consumed.countsCredit) --credits.unposted;
    Status status = host.repostBuffer(consumed.rank, consumed.buffer);
    if (!status.isOk()) {
      host.failPeer(consumed.rank, status);
      continue;
    }
    if (host.peerFailed(consumed.rank)) continue;  // nothing is owed to a failed sender
    if (consumed.countsCredit) {
      if (self)
        ++credits.credits;
      else
        ++credits.owed;
    }
  }
  consumed_.erase(kept, consumed_.end());
}

}  // namespace ibdt::messaging
