// mpi/alltoall_cache.h — a communicator's alltoall plans, kept by the MPI
// arguments they were built for, so that a call repeating them runs the
// plan it built before instead of building one (docs/mpi.md).
//
// The key holds what a plan depends on: buffers, counts, the converted
// types' ids and versions (MPI allows every one of them to change between
// calls), and the tag the plan's messages carry: the blocking calls all
// run on one pinned tag, each non-blocking call on the reserved tag of its
// sequence number (mpi/nonblocking.h), so a repeated MPI_Ialltoall finds
// the plan built for its tag. A run in flight shares its plan with the
// cache (a shared_ptr): such a plan is neither found nor evicted.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ibdt/collectives.h"
#include "ibdt/datatype.h"

namespace ibdt::mpi {

struct AlltoallArgs {
  const void* sendbuf;
  int sendcount;
  MPI_Datatype sendtype;
  void* recvbuf;
  int recvcount;
  MPI_Datatype recvtype;
  bool operator==(const AlltoallArgs&) const = default;
};

class AlltoallCache {
 public:
  struct Key {
    const void* sendbuf = nullptr;
    int sendcount = 0;
    uint32_t sendId = 0, sendVersion = 0;
    void* recvbuf = nullptr;
    int recvcount = 0;
    uint32_t recvId = 0, recvVersion = 0;
    int32_t tag = 0;
    bool operator==(const Key&) const = default;
  };
  using PlanPtr = std::shared_ptr<collectives::Plan>;

  explicit AlltoallCache(size_t capacity) : capacity_(capacity) {}

  // The plan for `key` that no run in flight holds, or null.
  const PlanPtr* find(const Key& key);
  // Keeps `plan` for `key`, evicting the least recently used plan that no
  // run holds when the cache is full.
  const PlanPtr& insert(const Key& key, collectives::Plan plan);
  void clear() {
    entries_.clear();
    forget();
  }

  // The previous call (its key and plan) if `args` repeat its MPI
  // arguments and no converted type was freed since (the handles then name
  // the same types): a repeated call skips the conversions and the lookup
  // (the loop of an application's timestep).
  struct Last {
    AlltoallArgs args{};
    uint64_t typesFreed = 0;
    Key key;
    collectives::Plan* plan = nullptr;  // owned by an entry: forgotten when it is evicted
  };
  const Last* repeated(const AlltoallArgs& args, uint64_t typesFreed) const {
    return last_.plan != nullptr && last_.typesFreed == typesFreed && last_.args == args ? &last_ : nullptr;
  }
  void remember(const AlltoallArgs& args, uint64_t typesFreed, const Key& key, const PlanPtr& plan) {
    last_ = {args, typesFreed, key, plan.get()};
  }
  void forget() { last_ = {}; }

  uint64_t built = 0;  // plans built (tests: a loop of identical calls builds one)

 private:
  struct Entry {
    Key key;
    PlanPtr plan;
    uint64_t lastUse = 0;
  };
  static bool held(const Entry& entry) { return entry.plan.use_count() > 1; }  // by a run in flight

  size_t capacity_;
  std::vector<Entry> entries_;
  uint64_t clock_ = 0;
  Last last_;
};

// The key of a call with these arguments and converted types on `tag`.
AlltoallCache::Key alltoallKey(const AlltoallArgs& args, const datatype::Datatype& send,
                               const datatype::Datatype& recv, int32_t tag);

}  // namespace ibdt::mpi
