// collectives/shared_runs_plan.h — the run loop of the plans that exchange
// through a segment of one node (alltoall_shared_memory.h,
// alltoallv_shared_memory.h).
//
// A run: the rank writes its part into the segment, raises its flag
// (shared_segment.h) and copies its share out of each peer's part once that
// peer's flag reached the run, peers in the order rank + 1, rank + 2, ...
// A failed run breaks the plan for good: the ranks no longer agree on the
// run number, so later starts return the failure.
#pragma once

#include <string_view>

#include "collectives/plan_impl.h"
#include "collectives/shared_segment.h"

namespace ibdt::collectives {

class SharedRunsPlan : public PlanImpl {
 public:
  Status start() final;
  Result<PollResult> poll() final;
  Status block(Deadline deadline) final;
  Status outcome() const final { return outcome_; }
  bool active() const final { return active_; }
  void abandon() final { active_ = false; }

 protected:
  // `what` names the algorithm in errors ("alltoall (shared-memory)").
  SharedRunsPlan(Communicator& comm, SharedRegion segment, std::string_view what)
      : comm_(comm), segment_(std::move(segment)), what_(what), p_(comm.size()), rank_(comm.rank()) {}

  // Writes this rank's part of run() into the segment (before its flag rises).
  virtual Status write() = 0;
  // After the flag rose: this rank's block for itself.
  virtual void ownBlock() = 0;
  // Copies this rank's share of `source`'s part of run() out.
  virtual void take(int source) = 0;
  // Ends the run (and the plan) with `status`; the first failure stays.
  void fail(Status status);

  uint64_t run() const { return run_; }
  const SharedRegion& segment() const { return segment_; }

  Communicator& comm_;
  SharedRegion segment_;
  const std::string_view what_;
  const int p_, rank_;

 private:
  bool arrived(int rank) const { return sharedFlag(segment_, rank).load(std::memory_order_acquire) >= run_; }

  uint64_t run_ = 0;  // the current or last run's number (the flags' value)
  int taken_ = 0;     // peers' parts of this run copied out; the next source is (rank_ + 1 + taken_) mod p
  uint32_t emptyPolls_ = 0;  // polls since a part last arrived
  bool active_ = false;
  Status outcome_;
  Status broken_;
};

}  // namespace ibdt::collectives
