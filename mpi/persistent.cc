// Persistent alltoall plans behind inert MPI persistent requests (see the header).
#include "mpi/persistent.h"

#include <map>
#include <memory>

#include "base/log.h"
#include "mpi/comm_state.h"
#include "mpi/staging.h"

namespace ibdt::mpi {
namespace {

struct PersistentAlltoall {
  collectives::Plan plan;
  StagedAlltoallv call;  // staged sides: packed at every start, unpacked at every completion
  MPI_Comm comm = MPI_COMM_NULL;
  HandleState state = HandleState::kInactive;
};

// By handle (one thread at a time, as ibdt's Contexts).
std::map<MPI_Request, std::unique_ptr<PersistentAlltoall>>& handles() {
  static std::map<MPI_Request, std::unique_ptr<PersistentAlltoall>> all;
  return all;
}
int running = 0;  // how many handles have a run not yet complete

PersistentAlltoall* find(MPI_Request request) {
  auto found = handles().find(request);
  return found == handles().end() ? nullptr : found->second.get();
}

void finish(PersistentAlltoall& op, Status outcome) {
  op.state = HandleState::kComplete;
  --running;
  if (outcome.isOk()) outcome = op.call.after(op.comm);
  if (!outcome.isOk()) {
    IBDT_LOG(kError, "mpi: persistent MPI_Alltoall(v): ", outcome.toString());
    PMPI_Comm_call_errhandler(op.comm, MPI_ERR_OTHER);
  }
}

// Keeps a built plan behind a new handle (see the header); ibdt's outcome.
Status adopt(Result<collectives::Plan> plan, StagedAlltoallv call, MPI_Comm comm, MPI_Request* request) {
  IBDT_RETURN_IF_ERROR(plan.status());
  if (PMPI_Send_init(nullptr, 0, MPI_BYTE, MPI_PROC_NULL, 0, comm, request) != MPI_SUCCESS) {
    *request = MPI_REQUEST_NULL;
    return makeError(Code::kResource, "mpi: MPI_Send_init of the persistent handle failed");
  }
  handles()[*request] = std::make_unique<PersistentAlltoall>(
      PersistentAlltoall{std::move(*plan), std::move(call), comm, HandleState::kInactive});
  return Status::ok();
}

}  // namespace

bool initPersistentAlltoall(CommState& state, const AlltoallArgs& args, MPI_Comm comm, MPI_Info,
                            MPI_Request* request, Status& status, std::string& why) {
  // No vote: a side ibdt cannot lay out is staged (mpi/staging.h), so every
  // rank of a correct program takes the call.
  Result<StagedAlltoallv> call = stageAlltoall(args, state.comm->size());
  if (!call.isOk()) {
    why = call.status().toString();
    return false;
  }
  *request = MPI_REQUEST_NULL;
  const bool inPlace = args.sendbuf == MPI_IN_PLACE;
  auto plan = collectives::alltoallInit(*state.comm, call->sendbuf, inPlace ? args.recvcount : args.sendcount,
                                        call->sendtype, call->recvbuf, args.recvcount, call->recvtype, state.alltoall);
  status = adopt(std::move(plan), std::move(*call), comm, request);
  return true;
}

bool initPersistentAlltoallv(CommState& state, const AlltoallvArgs& args, MPI_Comm comm, MPI_Info,
                             MPI_Request* request, Status& status, std::string& why) {
  Result<StagedAlltoallv> call = stageAlltoallv(args, state.comm->size(), true);
  if (!call.isOk()) why = call.status().toString();
  // The init is blocking and collective: one vote, so that all ranks or none
  // take it (only a type without a signature in ibdt is left to refuse).
  const int mine = why.empty() ? 1 : 0;
  int all = 0;
  PMPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm);
  if (all == 0) {
    if (why.empty()) why = "another rank cannot take it (a datatype without a signature in ibdt there)";
    return false;
  }
  *request = MPI_REQUEST_NULL;
  auto plan =
      collectives::alltoallvInit(*state.comm, call->sendbuf, call->sendcounts, call->sdispls, call->sendtype,
                                 call->recvbuf, call->recvcounts, call->rdispls, call->recvtype, state.alltoallv);
  status = adopt(std::move(plan), std::move(*call), comm, request);
  return true;
}

bool isPersistentAlltoall(MPI_Request request) { return !handles().empty() && find(request) != nullptr; }

Status startPersistentAlltoall(MPI_Request request) {
  PersistentAlltoall* op = find(request);
  if (op == nullptr) return makeError(Code::kInvalidArgument, "mpi: not a persistent alltoall of ibdt's");
  if (op->state != HandleState::kInactive) {
    return makeError(Code::kState, "mpi: MPI_Start of an active persistent alltoall");
  }
  IBDT_RETURN_IF_ERROR(op->call.before(op->comm));
  IBDT_RETURN_IF_ERROR(op->plan.start());
  op->state = HandleState::kRunning;
  ++running;
  return Status::ok();
}

HandleState handleState(MPI_Request request) {
  if (handles().empty()) return HandleState::kNotOurs;
  PersistentAlltoall* op = find(request);
  return op == nullptr ? HandleState::kNotOurs : op->state;
}

void markReported(MPI_Request request) {
  if (PersistentAlltoall* op = find(request); op != nullptr && op->state == HandleState::kComplete) {
    op->state = HandleState::kInactive;
  }
}

bool anyPersistentHandles() { return !handles().empty(); }

bool anyPersistentRunning() { return running > 0; }

bool progressPersistent(bool& progressed) {
  bool completed = false;
  for (auto& [handle, op] : handles()) {
    if (op->state != HandleState::kRunning) continue;
    bool moved = false;
    Result<bool> done = op->plan.test(&moved);
    progressed = progressed || moved;
    if (!done.isOk()) {
      finish(*op, done.status());
    } else if (*done) {
      finish(*op, op->plan.wait());
    } else {
      continue;
    }
    completed = true;
  }
  return completed;
}

void freePersistentAlltoall(MPI_Request request) {
  PersistentAlltoall* op = find(request);
  if (op == nullptr) return;
  if (op->state == HandleState::kRunning) finish(*op, op->plan.wait());
  handles().erase(request);
}

}  // namespace ibdt::mpi
