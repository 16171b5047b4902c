// mpi/nonblocking.h — MPI_Ialltoall on ibdt behind a generalized request.
//
// The request the program gets comes from MPI_Grequest_start; ibdt's plan
// behind it is progressed by the bridge's wrappers of the MPI_Wait and
// MPI_Test families (progressNonblocking(), mpi/request_interpose.cc), which
// complete the generalized request (MPI_Grequest_complete) once the plan's
// run is done, so MPI's own wait then returns it like any other request.
//
// Tags: non-blocking calls on one communicator may be in flight together,
// so they cannot share the blocking calls' pinned tag (a throttled run posts
// its receives late, and a later call's message would match an earlier
// call's receive). Each takes a reserved tag chosen by its sequence number
// on the communicator, the same on every rank since MPI orders collective
// calls: at most kNonblockingTags calls in flight per communicator.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

#include "ibdt/collectives.h"
#include "ibdt/status.h"
#include "mpi/alltoall_call.h"
#include "mpi/alltoallv_call.h"

namespace ibdt::mpi {

struct CommState;

// Reserved tags 1..13 (0 is the blocking calls', kNonblockingCheckTag the
// non-blocking alltoallv's pair checks, 15 the blocking alltoallv's).
inline constexpr int kNonblockingTags = 13;
inline constexpr int32_t kNonblockingCheckTag = collectives::Communicator::kFirstReservedPlanTag + 14;
// The reserved tag of slot `slot` (0 .. kNonblockingTags - 1).
inline int32_t nonblockingTag(int slot) { return collectives::Communicator::kFirstReservedPlanTag + 1 + slot; }

// Starts the alltoall on ibdt and sets `request`. Returns false, with `why`
// set, when it goes to MPI instead; otherwise `status` is the outcome of
// starting it (on an error, `request` is MPI_REQUEST_NULL); the run's
// outcome is the request's. There is no vote (a blocking agreement inside a
// non-blocking call could deadlock against calls on other communicators),
// so every rank of a correct program must decide alike: a side ibdt cannot
// lay out is staged (mpi/staging.h), and only a type without a signature
// in ibdt (MPI_REAL2) goes to MPI.
bool startIalltoall(CommState& state, const AlltoallArgs& args, MPI_Comm comm, MPI_Request* request,
                    Status& status, std::string& why);

// The same for MPI_Ialltoallv. Not in place on one node, the call mailbox
// (mpi/ialltoallv_prepared.h; blocks that do not fit run the checked
// pairwise plan on the call's reserved tag). Elsewhere the checked pairwise
// plan (collectives/checked_alltoallv.h, pair checks on
// kNonblockingCheckTag), kept per reserved tag while the calls repeat their
// arguments (mpi/tagged_plans.h). MPI_IN_PLACE runs ibdt's in-place alltoallv (a
// type inPlaceDirect() refuses: staged), built per call: its tags come
// from the communicator's counter (as the voted calls' and the persistent
// inits'), which agree only while every rank builds.
bool startIalltoallv(CommState& state, const AlltoallvArgs& args, MPI_Comm comm, MPI_Request* request,
                     Status& status, std::string& why);

// Whether ibdt has non-blocking runs in flight in this process.
bool nonblockingActive();
// Polls every run in flight once; completes the requests of those done.
// True when some run completed; sets `progressed` when some run moved
// (a round completed or was posted).
bool progressNonblocking(bool& progressed);

}  // namespace ibdt::mpi
