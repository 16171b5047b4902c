// mpi/alltoallv_call.h — one blocking MPI_Alltoallv on ibdt (pairwise, or
// ibdt's in-place alltoallv for MPI_IN_PLACE: docs/alltoallv.md).
//
// Unlike MPI_Alltoall, each call starts with one collective vote (an int
// MPI_Allreduce): a new plan's first run checks every pair's signatures in
// an extra exchange, so a rank must not start a cached plan while a peer
// runs a new one. The vote hands the call to MPI on every rank when a type
// does not convert on some rank or, in place, is not dense (ibdt's in-place
// algorithm moves bytes); starts the previous call's plan again when every
// rank repeats its arguments (buffers, types, counts and displacements);
// and otherwise makes every rank build a new plan, so the plans' tags agree.
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
    uint32_t sendId = 0, sendVersion = 0, recvId = 0, recvVersion = 0;
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

// Runs the alltoallv on ibdt. Returns false, with `why` set, when the ranks
// agreed to hand it to MPI; otherwise `status` is ibdt's outcome.
bool runAlltoallvOnIbdt(CommState& state, const AlltoallvArgs& args, MPI_Comm comm, Status& status,
                        std::string& why);

}  // namespace ibdt::mpi
