// MPI_Alltoall on ibdt: cached plans on the pinned bridge tag, no per-call
// agreement (see the header).
#include "mpi/alltoall_call.h"

#include <climits>
#include <optional>
#include <vector>

#include "collectives/alltoall_select.h"
#include "mpi/comm_state.h"
#include "mpi/direct_write_call.h"
#include "mpi/staging.h"
#include "mpi/type_convert.h"

namespace ibdt::mpi {
namespace {

using datatype::Datatype;

Result<collectives::Plan> buildPinned(CommState& state, const void* sendbuf, int64_t sendcount, const Datatype& send,
                                      void* recvbuf, int64_t recvcount, const Datatype& recv) {
  PinnedTag pinned(*state.comm);
  ++state.alltoallPlans.built;
  return collectives::alltoallInit(*state.comm, sendbuf, sendcount, send, recvbuf, recvcount, recv, state.alltoall);
}

AlltoallCache::Key keyOf(const AlltoallArgs& args, const Datatype& send, const Datatype& recv) {
  return alltoallKey(args, send, recv, kBlockingAlltoallTag);
}

// Both types converted: the cached plan for these arguments, or a new one.
Status runCached(CommState& state, const AlltoallArgs& args, const Datatype& send, const Datatype& recv,
                 uint64_t typesFreed) {
  const bool inPlace = args.sendbuf == MPI_IN_PLACE;
  const AlltoallCache::Key key = keyOf(args, send, recv);
  const AlltoallCache::PlanPtr* plan = state.alltoallPlans.find(key);
  if (plan == nullptr) {
    IBDT_ASSIGN_OR_RETURN(collectives::Plan built,
                          buildPinned(state, inPlace ? collectives::kInPlace : args.sendbuf,
                                      inPlace ? args.recvcount : args.sendcount, send, args.recvbuf, args.recvcount,
                                      recv));
    plan = &state.alltoallPlans.insert(key, std::move(built));
  }
  state.alltoallPlans.remember(args, typesFreed, key, *plan);
  return runPlan(**plan);
}

// At least one side's layout is not expressible (a negative extent): that
// side goes through a buffer packed (or unpacked) by MPI, described as
// dense elements of its signature, the same signature as the peers'
// messages in a correct program (mpi/staging.h). Not cached: the staging
// buffers live for the call.
Status runStaged(CommState& state, const AlltoallArgs& args, MPI_Comm comm, StagedAlltoallv& call) {
  const bool inPlace = args.sendbuf == MPI_IN_PLACE;
  IBDT_ASSIGN_OR_RETURN(collectives::Plan plan,
                        buildPinned(state, call.sendbuf, inPlace ? args.recvcount : args.sendcount, call.sendtype,
                                    call.recvbuf, args.recvcount, call.recvtype));
  IBDT_RETURN_IF_ERROR(call.before(comm));
  IBDT_RETURN_IF_ERROR(runPlan(plan));
  return call.after(comm);
}

// When building a plan communicates (hierarchical splits the communicator;
// kAuto across nodes agrees on the algorithm), every rank must build
// together: one vote per call, the minimum decides.
enum Vote : int { kCannot = 0, kNewPlan = 1, kSamePlan = 2 };

// The key tag of plans every rank built together (their tags come from the
// communicator's counter), apart from the pinned plans of the same arguments.
constexpr int32_t kVotedPlanKeyTag = -1;

bool runVoted(CommState& state, const AlltoallArgs& args, MPI_Comm comm, const Result<Datatype>& send,
              const Result<Datatype>& recv, Status& status) {
  const bool inPlace = args.sendbuf == MPI_IN_PLACE;
  int vote = kCannot;
  AlltoallCache::Key key;
  if (send.isOk() && recv.isOk()) {
    key = alltoallKey(args, *send, *recv, kVotedPlanKeyTag);
    vote = state.alltoallPlans.find(key) != nullptr ? kSamePlan : kNewPlan;
  }
  int agreed = kCannot;
  PMPI_Allreduce(&vote, &agreed, 1, MPI_INT, MPI_MIN, comm);
  if (agreed == kCannot) return false;
  if (agreed == kNewPlan) {
    state.alltoallPlans.clear();  // every rank then holds exactly the plans the others hold
    ++state.alltoallPlans.built;
    auto plan = collectives::alltoallInit(*state.comm, inPlace ? collectives::kInPlace : args.sendbuf,
                                          inPlace ? args.recvcount : args.sendcount, *send, args.recvbuf,
                                          args.recvcount, *recv, state.alltoall);
    if (!plan.isOk()) {
      status = plan.status();
      return true;
    }
    state.alltoallPlans.insert(key, std::move(*plan));
  }
  status = runPlan(**state.alltoallPlans.find(key));
  return true;
}

// The block's MPI size when ibdt's own choice for such blocks, were every
// rank to build the plan together, is direct-write (large blocks; its init
// exchanges keys, docs/alltoall-selection.md) or the shared-memory alltoall
// (one node; its init maps a segment, docs/alltoall-shared-memory.md): what
// the native persistent plan runs, where a pinned plan (built by one rank
// alone) runs pairwise or Bruck. Else 0. Decided from the block's MPI size, the same
// on every rank of a correct program, whatever types convert here;
// remembered for the last block size asked. Blocks beyond MPI's int
// counts stay pinned (their staging through PMPI_Pack could not count them).
int64_t directWriteBlockBytes(CommState& state, const AlltoallArgs& args) {
  if (state.alltoall.algorithm != collectives::AlltoallAlgorithm::kAuto || args.sendbuf == MPI_IN_PLACE) return 0;
  const std::optional<int64_t> blockBytes = mpiBlockBytes(args);
  if (!blockBytes) return 0;
  CommState::DirectWriteChoice& choice = state.directWriteChoice;
  if (choice.blockBytes != *blockBytes) {
    const auto model = collectives::AlltoallCostModel::fromTuning(state.context->tuning());
    const auto picked = collectives::selectAlltoall(model, state.comm->size(), *blockBytes, true,
                                                    state.comm->nodeCount(), false);
    const bool collectiveInit = picked.algorithm == collectives::AlltoallAlgorithm::kDirectWrite ||
                                picked.algorithm == collectives::AlltoallAlgorithm::kSharedMemory;
    choice = {*blockBytes, collectiveInit && *blockBytes * state.comm->size() <= INT_MAX, picked.algorithm};
  }
  return choice.chosen ? *blockBytes : 0;
}

}  // namespace

std::optional<int64_t> mpiBlockBytes(const AlltoallArgs& args) {
  int typeSize = 0;
  if (PMPI_Type_size(args.recvtype, &typeSize) != MPI_SUCCESS) return std::nullopt;
  return static_cast<int64_t>(typeSize) * args.recvcount;
}

Status runPlan(collectives::Plan& plan) {
  IBDT_RETURN_IF_ERROR(plan.start());
  return plan.wait();
}

bool runOnIbdt(CommState& state, const AlltoallArgs& args, MPI_Comm comm, Status& status, std::string& why) {
  // MPI_IN_PLACE ignores sendcount and sendtype (often MPI_DATATYPE_NULL):
  // the blocks leave from recvbuf as recvcount x recvtype.
  // A call with the previous call's arguments takes the same path, with no
  // conversion, lookup or vote.
  const uint64_t typesFreed = convertedTypesFreed();
  if (const AlltoallCache::Last* last = state.alltoallPlans.repeated(args, typesFreed); last != nullptr) {
    status = runPlan(*last->plan);
    return true;
  }
  if (DirectWritePlan* plan = state.directWritePlans.repeated(args, typesFreed); plan != nullptr) {
    status = rerunDirectWrite(*plan, comm);
    return true;
  }
  const bool inPlace = args.sendbuf == MPI_IN_PLACE;
  const Result<Datatype> recv = convertType(args.recvtype);
  const Result<Datatype> send = inPlace ? recv : convertType(args.sendtype);
  why = !send.isOk() ? send.status().toString() : !recv.isOk() ? recv.status().toString() : "";
  if (collectives::alltoallInitIsCollective(*state.comm, state.alltoall)) {
    if (!runVoted(state, args, comm, send, recv, status)) {
      if (why.empty()) why = "a datatype did not convert on another rank";
      return false;
    }
    return true;
  }
  // Direct-write plans per block size, no vote: every rank takes them
  // whatever its types (a side ibdt cannot write in place is staged).
  if (const int64_t blockBytes = directWriteBlockBytes(state, args); blockBytes > 0) {
    status = runDirectWrite(state, args, comm, blockBytes, send, recv, typesFreed);
    return true;
  }
  if (send.isOk() && recv.isOk()) {
    status = runCached(state, args, *send, *recv, typesFreed);
    return true;
  }
  Result<StagedAlltoallv> call = stageAlltoall(args, state.comm->size());
  if (!call.isOk()) return false;  // no signature in ibdt: alike on every rank of a correct program
  status = runStaged(state, args, comm, *call);
  return true;
}

}  // namespace ibdt::mpi
