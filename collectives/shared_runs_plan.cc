// The run loop of the shared-segment plans (see the header).
#include "collectives/shared_runs_plan.h"

namespace ibdt::collectives {

Status SharedRunsPlan::start() {
  if (!broken_.isOk()) return broken_;
  ++run_;
  taken_ = 0;
  outcome_ = Status::ok();
  if (Status written = write(); !written.isOk()) {
    // The peers wait for a flag that will not rise (their deadline ends it).
    broken_ = written.withContext(strCat(what_, " rank ", rank_, ", run ", run_));
    return broken_;
  }
  sharedFlag(segment_, rank_).store(run_, std::memory_order_release);
  ownBlock();
  active_ = true;
  return Status::ok();
}

void SharedRunsPlan::fail(Status status) {
  if (!outcome_.isOk()) return;
  outcome_ = status.withContext(strCat(what_, " rank ", rank_, ", run ", run_));
  broken_ = outcome_;
}

Result<PollResult> SharedRunsPlan::poll() {
  PollResult result;
  if (!active_) return result;
  while (taken_ < p_ - 1 && outcome_.isOk()) {
    const int source = (rank_ + 1 + taken_) % p_;
    if (!arrived(source)) {
      // A program polling by test() learns of a dead peer here, as block() would.
      if (++emptyPolls_ % kSharedWaitsPerCheck == 0) {
        Status peerFailed;
        Status checked = checkSharedPeer(comm_, source, run_, peerFailed);
        if (!checked.isOk()) fail(std::move(checked));  // the run ends here, as on every rank that stops
        if (!peerFailed.isOk()) fail(std::move(peerFailed));
      }
      break;
    }
    take(source);
    ++taken_;
    emptyPolls_ = 0;
    result.progressed = true;
  }
  if (taken_ == p_ - 1 || !outcome_.isOk()) {
    active_ = false;
    result.done = true;
  }
  return result;
}

Status SharedRunsPlan::block(Deadline deadline) {
  if (!active_ || taken_ == p_ - 1) return Status::ok();
  Status peerFailed;
  IBDT_RETURN_IF_ERROR(awaitSharedFlag(comm_, segment_, (rank_ + 1 + taken_) % p_, run_, deadline, what_, peerFailed));
  if (!peerFailed.isOk()) fail(std::move(peerFailed));
  return Status::ok();
}

}  // namespace ibdt::collectives
