// mpi/alltoallv_call.h — one blocking MPI_Alltoallv on ibdt.
//
// Not in place: no agreement per call, like MPI_Alltoall
// (mpi/alltoall_call.h). The previous call's plan is started again when the
// arguments repeat it (buffers, datatype handles, counts and displacements,
// no converted type freed since); otherwise a new plan is built on the
// blocking calls' pinned tag (collectives/checked_alltoallv.h): its first
// run checks, on a tag of its own, the pairs whose signatures changed since
// they were last checked, so one rank may reuse its plan while another
// builds a new one (it moved its buffers) and the runs still pair up, and a
// pair changed on one rank only fails with an error on the ranks involved,
// not a hang. A side ibdt cannot lay out is staged (mpi/staging.h); only a
// type without an ibdt signature goes to MPI, alike on every rank of a
// correct program.
//
// MPI_IN_PLACE keeps one collective vote (an int MPI_Allreduce) per call:
// ibdt's in-place alltoallv takes its three tags from the communicator's
// counter, which agrees only when every rank builds together. The vote
// hands the call to MPI on every rank when a type does not convert on some
// rank or is not dense (ibdt's in-place algorithm moves bytes), starts the
// previous plan when every rank repeats its arguments, and otherwise makes
// every rank build a new plan.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ibdt/collectives.h"
#include "ibdt/status.h"

namespace ibdt::mpi {

struct CommState;

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

// MPI's int counts or displacements of `count` ranks as ibdt's int64.
inline std::vector<int64_t> widened(const int* values, int count) {
  return std::vector<int64_t>(values, values + count);
}

// Whether ibdt's in-place alltoallv can move `type` directly: one element
// is size() contiguous bytes from lb 0.
bool denseType(const datatype::Datatype& type);

// Why this rank cannot take an alltoallv with these converted types (empty:
// it can): a type did not convert, or MPI_IN_PLACE with a type that is not
// dense (ibdt's in-place algorithm moves one element as size() bytes).
std::string alltoallvObstacle(const Result<datatype::Datatype>& send, const Result<datatype::Datatype>& recv,
                              bool inPlace);

// Runs the alltoallv on ibdt. Returns false, with `why` set, when it goes
// to MPI (in place: the ranks agreed so); otherwise `status` is ibdt's outcome.
bool runAlltoallvOnIbdt(CommState& state, const AlltoallvArgs& args, MPI_Comm comm, Status& status,
                        std::string& why);

}  // namespace ibdt::mpi
