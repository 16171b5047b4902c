// mpi/alltoallv_call.h — one blocking MPI_Alltoallv on ibdt.
//
// No agreement per call, like MPI_Alltoall (mpi/alltoall_call.h). The
// previous call's plan is started again when the arguments repeat it
// (buffers, datatype handles, counts and displacements, no converted type
// freed since); otherwise a new plan is built on the blocking calls' pinned
// tag, so one rank may reuse its plan while another builds a new one (it
// moved its buffers) and the runs still pair up. Not in place, the plan is
// collectives/checked_alltoallv.h: its first run checks, on a tag of its
// own, the pairs whose signatures changed since they were last checked. In
// place, it is ibdt's in-place alltoallv, whose every run checks every pair
// in its first control exchange (collectives/alltoallv_inplace.cc). Either
// way a pair changed on one rank only fails with an error on the ranks
// involved, not a hang. A side ibdt cannot lay out (in place: a type
// inPlaceDirect() refuses) is staged (mpi/staging.h); only a type without an ibdt
// signature goes to MPI, alike on every rank of a correct program.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collectives/checked_alltoallv.h"
#include "ibdt/collectives.h"
#include "ibdt/status.h"

namespace ibdt::mpi {

struct CommState;
struct StagedAlltoallv;

struct AlltoallvArgs {
  const void* sendbuf;
  const int* sendcounts;
  const int* sdispls;
  MPI_Datatype sendtype;
  void* recvbuf;
  const int* recvcounts;
  const int* rdispls;
  MPI_Datatype recvtype;
};

// The previous call's plan and what it was built for.
struct AlltoallvCache {
  struct Key {
    const void* sendbuf = nullptr;
    void* recvbuf = nullptr;
    // The handles name the same types while no converted type was freed.
    MPI_Datatype sendtype = MPI_DATATYPE_NULL, recvtype = MPI_DATATYPE_NULL;
    uint64_t typesFreed = 0;
    std::vector<int64_t> sendcounts, sdispls, recvcounts, rdispls;
    bool operator==(const Key&) const = default;
  };
  Key key;
  collectives::Plan plan;
};

// The key of a call with `args` on `p` ranks; `typesFreed`: convertedTypesFreed().
AlltoallvCache::Key alltoallvKey(const AlltoallvArgs& args, int p, uint64_t typesFreed);
// alltoallvKey(args, p, typesFreed) == key, without building the key (four
// vectors of p values: allocations on every call) or converting the types.
bool repeatsAlltoallv(const AlltoallvCache::Key& key, const AlltoallvArgs& args, int p, uint64_t typesFreed);

// MPI's int counts or displacements of `count` ranks as ibdt's int64.
inline std::vector<int64_t> widened(const int* values, int count) {
  return std::vector<int64_t>(values, values + count);
}

// Whether ibdt's in-place alltoallv can move blocks of `type` directly:
// its elements share no byte (collectives/inplace_elements.h) and do not
// interleave (extent >= true extent), so blocks that MPI allows (disjoint
// elements) also pass ibdt's byte-range check of the receive blocks.
bool inPlaceDirect(const datatype::Datatype& type);

// The pairwise plan of `call` (not in place) whose first run checks the
// pairs changed since `history` last checked them, on `checkTag`, as call
// `callNumber` (collectives/checked_alltoallv.h); its data takes the tag
// pinned now.
Result<collectives::Plan> checkedAlltoallvPlan(CommState& state, const StagedAlltoallv& call, int32_t checkTag,
                                               int64_t callNumber,
                                               std::shared_ptr<collectives::PairCheckHistory> history);

// Runs the alltoallv on ibdt. Returns false, with `why` set, when it goes
// to MPI; otherwise `status` is ibdt's outcome.
bool runAlltoallvOnIbdt(CommState& state, const AlltoallvArgs& args, MPI_Comm comm, Status& status,
                        std::string& why);

}  // namespace ibdt::mpi
