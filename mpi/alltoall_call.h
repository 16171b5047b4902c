// mpi/alltoall_call.h — one blocking MPI_Alltoall on ibdt, without any
// agreement between the ranks per call.
//
// Every plan the bridge builds for a blocking alltoall takes the
// communicator's pinned bridge tag (Communicator::pinPlanTag): the calls run
// one at a time, each to completion, and runs on one tag match in order, so
// each rank may build a new plan or start a cached one as it likes (buffers
// reallocated on one rank only, a plan evicted on one rank only) and the
// messages still pair up. The wire of a run does not depend on whether its
// plan is new: alltoall checks each message's signature as it arrives, so a
// mismatch fails that receive with an error naming the peer on every run.
//
// The choice between ibdt and MPI is made locally and is the same on every
// rank of a correct program: a type whose layout ibdt cannot express
// (negative extent), on one side, both sides or with MPI_IN_PLACE, is
// staged through PMPI_Pack / PMPI_Unpack against a dense type of its own
// signature (signatureType), so that rank still takes part; only a call
// with a signature ibdt has no basic type for goes to MPI, and that fails
// on every rank alike. The hierarchical algorithm, whose plans split
// the communicator at init (collective), keeps one collective vote per call.
// Blocks for which ibdt's own choice is direct-write (large blocks on one
// node, as the native persistent plan runs them; its init exchanges keys)
// run on plans built by every rank together once per block size and moved
// to each call's buffers locally (mpi/direct_write_call.h): no vote.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <optional>

#include <cstdint>
#include <string>

#include "ibdt/collectives.h"
#include "mpi/alltoall_cache.h"

namespace ibdt::mpi {

struct CommState;

// The reserved tag of every blocking call's data (alltoall and alltoallv:
// they run one at a time, each to completion, so they pair up in call order).
inline constexpr int32_t kBlockingAlltoallTag = collectives::Communicator::kFirstReservedPlanTag;

// Every plan built while this lives takes `tag` (default: the blocking calls').
class PinnedTag {
 public:
  explicit PinnedTag(collectives::Communicator& comm, int32_t tag = kBlockingAlltoallTag) : comm_(comm) {
    comm_.pinPlanTag(tag);
  }
  ~PinnedTag() { comm_.unpinPlanTag(); }
  PinnedTag(const PinnedTag&) = delete;
  PinnedTag& operator=(const PinnedTag&) = delete;

 private:
  collectives::Communicator& comm_;
};

// Starts `plan` and waits for it.
Status runPlan(collectives::Plan& plan);

// The call's block in bytes as MPI sizes it (recvcount x MPI_Type_size of
// recvtype): the same on every rank of a correct program, whatever types
// convert here, so paths chosen by it are chosen alike. Empty when MPI
// cannot size the type.
std::optional<int64_t> mpiBlockBytes(const AlltoallArgs& args);

// Runs the alltoall on ibdt. Returns false, with `why` set, when it goes to
// MPI instead (no type converts); otherwise `status` is ibdt's outcome.
bool runOnIbdt(CommState& state, const AlltoallArgs& args, MPI_Comm comm, Status& status, std::string& why);

}  // namespace ibdt::mpi
