// mpi/direct_write_call.h — the blocking MPI_Alltoall whose blocks ibdt
// would write directly (direct-write: large blocks) or move through one
// shared segment (shared-memory: one node), with no agreement between the
// ranks per call. Both inits are collective and both plans move to other
// buffers alone; the names below say direct-write for both.
//
// Direct-write's init is collective (it exchanges the receive buffers'
// keys), so a plan one rank builds alone cannot be one; before, every such
// call took an MPI_Allreduce vote (same plan / new plan / cannot) so that the
// ranks built together when any of them needed a new plan: ~0.6-1 us of a
// 13 us call at 2 ranks and 64 KiB (docs/mpi.md). Now the plan is kept per
// block size, which every rank of a correct MPI program knows alike (the
// block's MPI size): the ranks build it together on the first call with
// that size and later calls run it without asking anyone. What one rank
// may change alone it changes locally:
// - its buffers: the plan moves to them (collectives::Plan::rebind; the
//   peers write where this rank's next "ready" message says);
// - its types: a shared-memory plan packs each rank's blocks into the
//   segment itself, so it takes the converted types (collectives::Plan::
//   rebind with types); for a direct-write plan, whose peers write into
//   this rank's blocks, a side whose type is not one dense run of bytes per
//   block goes through a staging buffer of its own (mpi/staging.h), packed
//   and unpacked by ibdt's engine, or by PMPI_Pack/PMPI_Unpack when the
//   type does not convert or has no ibdt signature (then in both plans);
//   the plan runs on the dense buffer.
// The plans of a few block sizes are kept, evicted least recently used;
// every rank sees the same sequence of block sizes, so they evict alike.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "ibdt/collectives.h"
#include "ibdt/datatype.h"
#include "mpi/alltoall_cache.h"
#include "mpi/staging.h"

namespace ibdt::mpi {

struct CommState;

// One side of the call as the plan sees it: the program's buffer, or a
// staging buffer packed from (unpacked into) it.
struct DirectWriteSide {
  const void* base = nullptr;  // the program's buffer
  int count = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  std::unique_ptr<StagedSide> stage;  // null: the plan runs on `base`
  // Set: a shared-memory plan packs (unpacks) `base` as count x this itself.
  std::optional<datatype::Datatype> ibdtType;
  bool operator==(const DirectWriteSide&) const = delete;
};

// A direct-write plan built by every rank together for blocks of `blockBytes`.
struct DirectWritePlan {
  int64_t blockBytes = 0;
  collectives::Plan plan;
  DirectWriteSide send, recv;
  uint64_t lastUse = 0;
};

class DirectWritePlans {
 public:
  explicit DirectWritePlans(size_t capacity) : capacity_(capacity) {}

  // The plan for blocks of `blockBytes` (marked used), or null.
  DirectWritePlan* find(int64_t blockBytes);
  // Keeps a new plan, evicting the least recently used one when full.
  DirectWritePlan& insert(int64_t blockBytes, collectives::Plan plan);
  // The previous call's plan if `args` repeat its MPI arguments and no
  // converted type was freed since (marked used, as find() would: every
  // rank ages the plans alike), else null.
  DirectWritePlan* repeated(const AlltoallArgs& args, uint64_t typesFreed);
  void remember(const AlltoallArgs& args, uint64_t typesFreed, DirectWritePlan& plan) {
    last_ = {args, typesFreed, &plan};
  }
  void forget() { last_ = {}; }
  void clear() {
    plans_.clear();
    forget();
  }
  uint64_t built = 0;  // plans built (tests: one per block size)

 private:
  struct Last {
    AlltoallArgs args{};
    uint64_t typesFreed = 0;
    DirectWritePlan* plan = nullptr;
  };
  size_t capacity_;
  std::vector<std::unique_ptr<DirectWritePlan>> plans_;
  uint64_t clock_ = 0;
  Last last_;
};

// Runs the call on the direct-write plan for its blocks (`blockBytes`, their
// MPI size), building it with every rank on the first call of that size.
// `send` and `recv`: the types' conversions (failures are staged).
Status runDirectWrite(CommState& state, const AlltoallArgs& args, MPI_Comm comm, int64_t blockBytes,
                      const Result<datatype::Datatype>& send, const Result<datatype::Datatype>& recv,
                      uint64_t typesFreed);
// A call that repeated the previous direct-write call's arguments.
Status rerunDirectWrite(DirectWritePlan& plan, MPI_Comm comm);

}  // namespace ibdt::mpi
