// mpi/persistent.h — the persistent MPI_Alltoall_init / MPI_Alltoallv_init
// (MPICH 4.0) and MPIX_Alltoall(v)_init (Open MPI 4.1) on an ibdt plan.
//
// The handle the program gets is a real persistent request of MPI's that
// is never started (a zero-byte MPI_Send_init to MPI_PROC_NULL), so it is a
// valid, unique handle that MPI_Request_free accepts. The bridge's wrappers
// of MPI_Start(all) start the plan instead, and those of the wait and test
// families hide the handle from MPI and report its completion themselves
// (mpi/request_interpose.cc): MPICH 4.0 reports a started persistent
// request to MPI_PROC_NULL as inactive to MPI_Testany, so MPI cannot be
// left to report it.
// The plan takes the communicator's tag counter at init, like the voted
// calls: persistent inits are collective and ordered, so the tags agree.
#pragma once

#include <mpi.h>

#include <string>

#include "ibdt/status.h"
#include "mpi/alltoall_call.h"
#include "mpi/alltoallv_call.h"

namespace ibdt::mpi {

struct CommState;

// Builds the plan and the handle. Returns false, with `why` set, when the
// call goes to MPI instead (a type without a signature in ibdt). A side
// ibdt cannot lay out is staged (mpi/staging.h): packed at every start,
// unpacked when the run completes.
bool initPersistentAlltoall(CommState& state, const AlltoallArgs& args, MPI_Comm comm, MPI_Info info,
                            MPI_Request* request, Status& status, std::string& why);

// The same for MPI_Alltoallv_init (MPICH 4.0) / MPIX_Alltoallv_init (Open
// MPI 4.1) on ibdt's alltoallv plans (MPI_IN_PLACE: the in-place plan, a
// type inPlaceDirect() refuses staged). The init votes (one MPI_Allreduce), so all ranks or none take
// it. Everything below applies to both kinds of handle.
bool initPersistentAlltoallv(CommState& state, const AlltoallvArgs& args, MPI_Comm comm, MPI_Info info,
                             MPI_Request* request, Status& status, std::string& why);

// Whether `request` is a handle of this bridge's.
bool isPersistentAlltoall(MPI_Request request);
// Starts its plan.
Status startPersistentAlltoall(MPI_Request request);
// A handle's state as the wait and test calls see it: inactive (never
// started, or its completion reported), running, or complete and not yet
// reported (it then counts as one completed request, once).
enum class HandleState { kNotOurs, kInactive, kRunning, kComplete };
HandleState handleState(MPI_Request request);
// The completion of a kComplete handle was reported: it becomes inactive.
void markReported(MPI_Request request);
bool anyPersistentHandles();
bool anyPersistentRunning();
// Polls every running plan once (an error goes through the communicator's
// error handler when its run completes). True when some run completed;
// sets `progressed` when some run moved (a round completed or was posted).
bool progressPersistent(bool& progressed);
// Forgets `request` (waits for its run first, as MPI lets a freed active
// request complete).
void freePersistentAlltoall(MPI_Request request);

}  // namespace ibdt::mpi
