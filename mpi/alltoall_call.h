// mpi/alltoall_call.h — one MPI_Alltoall on ibdt: the arguments converted,
// every rank agreeing to take it (or all hand it to MPI), and the plan of
// the previous call started again when every rank repeats its arguments,
// so a loop of identical alltoalls (the common case) builds no plan and
// checks no signature after the first call.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

#include "ibdt/collectives.h"
#include "ibdt/datatype.h"

namespace ibdt::mpi {

struct CommState;

// The last plan of a communicator and the arguments it was built for.
struct AlltoallCache {
  struct Key {
    const void* sendbuf = nullptr;
    int sendcount = 0;
    uint32_t sendId = 0, sendVersion = 0;
    void* recvbuf = nullptr;
    int recvcount = 0;
    uint32_t recvId = 0, recvVersion = 0;
    bool operator==(const Key&) const = default;
  };
  Key key;
  collectives::Plan plan;
};

struct AlltoallArgs {
  const void* sendbuf;
  int sendcount;
  MPI_Datatype sendtype;
  void* recvbuf;
  int recvcount;
  MPI_Datatype recvtype;
};

// Runs the alltoall on ibdt. Returns false, with `why` set, when the ranks
// agreed to hand it to MPI instead (a type that does not convert on some
// rank); otherwise `status` is ibdt's outcome.
bool runOnIbdt(CommState& state, const AlltoallArgs& args, MPI_Comm comm, Status& status, std::string& why);

}  // namespace ibdt::mpi
