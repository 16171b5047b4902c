// mpi/tagged_plans.h — the plans of the non-blocking calls that the
// communicator's plan cache (mpi/alltoall_cache.h) does not key by
// converted types: MPI_Ialltoallv (counts and displacements are part of
// its arguments) and the staged MPI_Ialltoall (a side ibdt cannot lay out,
// mpi/staging.h), each with the staging buffers it runs on.
//
// Kept for the arguments of the previous such call only, one plan per
// reserved tag (a plan's messages carry the tag it was built with,
// mpi/nonblocking.h): a call that repeats the previous call's arguments
// starts the plan of its tag, built by the call 13 calls before; any other
// call drops them. Why the previous call only: MPI_Ialltoallv's plan checks
// a pair's signatures in its first run when they differ from the pair last
// checked (collectives/checked_alltoallv.h), and a plan started again does
// not check; only a plan of the previous call's arguments is sure to have
// the pairs last checked, so a rank reusing it and a peer building anew
// (it moved a buffer) agree that nothing is checked. A run in flight
// shares its plan (a shared_ptr): such a plan is not handed out again.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>

#include "ibdt/collectives.h"
#include "mpi/nonblocking.h"
#include "mpi/staging.h"

namespace ibdt::mpi {

// A plan and the staging buffers (if any) it runs on.
struct StagedPlan {
  collectives::Plan plan;
  StagedAlltoallv call;
};
using StagedPlanPtr = std::shared_ptr<StagedPlan>;

// A staged MPI_Ialltoall's key: its handles name the same types while no
// converted type was freed (convertedTypesFreed()).
struct StagedAlltoallKey {
  AlltoallArgs args;
  uint64_t typesFreed = 0;
  bool operator==(const StagedAlltoallKey&) const = default;
};

template <class Key>
class TaggedPlans {
 public:
  // The previous call's arguments, if any.
  const std::optional<Key>& key() const { return key_; }
  // Another call: forgets the previous call's plans (runs keep theirs).
  void reset(Key key) {
    key_ = std::move(key);
    plans_ = {};
  }
  // The plan kept for reserved tag `slot` that no run holds, or null.
  StagedPlanPtr find(int slot) const {
    const StagedPlanPtr& plan = plans_[static_cast<size_t>(slot)];
    return plan && plan.use_count() == 1 && plan->plan.valid() ? plan : nullptr;
  }
  void keep(int slot, StagedPlanPtr plan) {
    ++built;
    plans_[static_cast<size_t>(slot)] = std::move(plan);
  }
  void clear() {
    key_.reset();
    plans_ = {};
  }

  uint64_t built = 0;  // plans built (tests: a loop of identical calls builds one per tag)

 private:
  std::optional<Key> key_;
  std::array<StagedPlanPtr, kNonblockingTags> plans_{};
};

}  // namespace ibdt::mpi
