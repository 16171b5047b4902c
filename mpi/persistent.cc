// Persistent alltoall plans behind inert MPI persistent requests (see the header).
#include "mpi/persistent.h"

#include <map>
#include <memory>

#include "base/log.h"
#include "mpi/comm_state.h"
#include "mpi/type_convert.h"

namespace ibdt::mpi {
namespace {

struct PersistentAlltoall {
  collectives::Plan plan;
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

void finish(PersistentAlltoall& op, const Status& outcome) {
  op.state = HandleState::kComplete;
  --running;
  if (!outcome.isOk()) {
    IBDT_LOG(kError, "mpi: persistent MPI_Alltoall: ", outcome.toString());
    PMPI_Comm_call_errhandler(op.comm, MPI_ERR_OTHER);
  }
}

}  // namespace

bool initPersistentAlltoall(CommState& state, const AlltoallArgs& args, MPI_Comm comm, MPI_Info,
                            MPI_Request* request, Status& status, std::string& why) {
  const bool inPlace = args.sendbuf == MPI_IN_PLACE;
  const Result<datatype::Datatype> recv = convertType(args.recvtype);
  const Result<datatype::Datatype> send = inPlace ? recv : convertType(args.sendtype);
  if (!send.isOk() || !recv.isOk()) {
    why = !send.isOk() ? send.status().toString() : recv.status().toString();
    return false;
  }
  *request = MPI_REQUEST_NULL;
  auto plan = collectives::alltoallInit(*state.comm, inPlace ? collectives::kInPlace : args.sendbuf,
                                        inPlace ? args.recvcount : args.sendcount, *send, args.recvbuf,
                                        args.recvcount, *recv, state.alltoall);
  status = plan.status();
  if (!status.isOk()) return true;
  if (PMPI_Send_init(nullptr, 0, MPI_BYTE, MPI_PROC_NULL, 0, comm, request) != MPI_SUCCESS) {
    *request = MPI_REQUEST_NULL;
    status = makeError(Code::kResource, "mpi: MPI_Send_init of the persistent handle failed");
    return true;
  }
  handles()[*request] =
      std::make_unique<PersistentAlltoall>(PersistentAlltoall{std::move(*plan), comm, HandleState::kInactive});
  return true;
}

bool isPersistentAlltoall(MPI_Request request) { return !handles().empty() && find(request) != nullptr; }

Status startPersistentAlltoall(MPI_Request request) {
  PersistentAlltoall* op = find(request);
  if (op == nullptr) return makeError(Code::kInvalidArgument, "mpi: not a persistent alltoall of ibdt's");
  if (op->state != HandleState::kInactive) {
    return makeError(Code::kState, "mpi: MPI_Start of an active persistent alltoall");
  }
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

void progressPersistent() {
  for (auto& [handle, op] : handles()) {
    if (op->state != HandleState::kRunning) continue;
    Result<bool> done = op->plan.test();
    if (!done.isOk()) {
      finish(*op, done.status());
    } else if (*done) {
      finish(*op, op->plan.wait());
    }
  }
}

void waitPersistentBriefly(std::chrono::microseconds limit) {
  for (auto& [handle, op] : handles()) {
    if (op->state == HandleState::kRunning) {
      (void)op->plan.wait(Deadline::after(limit));  // its outcome: collected by progressPersistent
      return;
    }
  }
}

void freePersistentAlltoall(MPI_Request request) {
  PersistentAlltoall* op = find(request);
  if (op == nullptr) return;
  if (op->state == HandleState::kRunning) finish(*op, op->plan.wait());
  handles().erase(request);
}

}  // namespace ibdt::mpi
