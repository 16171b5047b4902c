// mpi/alltoallv_mailbox_call.h — the blocking MPI_Alltoallv of one node's
// ranks through the communicator's mailbox (collectives/alltoallv_mailbox.h):
// no vote and no message per call, whatever counts, types and buffers each
// rank passes.
//
// The mailbox is made by the communicator's first blocking MPI_Alltoallv
// (collective: every rank of a correct program makes that call as its
// first), when the communicator spans one node and IBDT_ALLTOALLV_ALGORITHM
// is auto; each rank's share of it is IBDT_ALLTOALLV_INPLACE_BYTES. A call
// whose blocks do not fit some rank's row comes back to the caller on every
// rank alike, which then runs it as before (mpi/alltoallv_call.h). The
// prepared call is kept while the arguments repeat, as the plans are.
#pragma once

#include <mpi.h>

#include "ibdt/status.h"
#include "mpi/alltoallv_call.h"

namespace ibdt::mpi {

// True: the call ran through the mailbox and `status` is its outcome.
// False on every rank alike: run it another way.
bool runThroughMailbox(CommState& state, const AlltoallvArgs& args, MPI_Comm comm, Status& status);

}  // namespace ibdt::mpi
