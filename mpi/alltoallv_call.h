// mpi/alltoallv_call.h — one blocking MPI_Alltoallv on ibdt (pairwise, or
// ibdt's in-place alltoallv for MPI_IN_PLACE: docs/alltoallv.md).
//
// Unlike MPI_Alltoall, each call builds its plan (counts and displacements
// change from call to call in the usual codes, and a new plan's first run
// checks every pair's signatures) after one collective vote: the ranks
// hand the call to MPI together when a type does not convert on some rank,
// or, in place, is not dense (ibdt's in-place algorithm moves bytes).
// Every rank builds one plan per call, so the plans' tags agree.
#pragma once

#include <mpi.h>

#include <string>

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

// Runs the alltoallv on ibdt. Returns false, with `why` set, when the ranks
// agreed to hand it to MPI; otherwise `status` is ibdt's outcome.
bool runAlltoallvOnIbdt(CommState& state, const AlltoallvArgs& args, MPI_Comm comm, Status& status,
                        std::string& why);

}  // namespace ibdt::mpi
