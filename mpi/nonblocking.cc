// Non-blocking alltoall on ibdt behind generalized requests (see the header).
#include "mpi/nonblocking.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "base/log.h"
#include "mpi/comm_state.h"
#include "mpi/staging.h"

namespace ibdt::mpi {
namespace {

// One run in flight, owned by its generalized request (freed by free_fn).
struct NonblockingRun {
  collectives::Plan plan;
  StagedAlltoallv call;  // its staging buffers, if any: unpacked when the run is done
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Request request = MPI_REQUEST_NULL;
  Status outcome;
};

// The runs not yet complete (one thread at a time, as ibdt's Contexts).
std::vector<NonblockingRun*>& inFlight() {
  static std::vector<NonblockingRun*> runs;
  return runs;
}

int queryRun(void* extra, MPI_Status* status) {
  auto* run = static_cast<NonblockingRun*>(extra);
  PMPI_Status_set_elements(status, MPI_BYTE, 0);
  PMPI_Status_set_cancelled(status, 0);
  status->MPI_SOURCE = MPI_UNDEFINED;
  status->MPI_TAG = MPI_UNDEFINED;
  const int code = run->outcome.isOk() ? MPI_SUCCESS : MPI_ERR_OTHER;
  status->MPI_ERROR = code;
  return code;
}

int freeRun(void* extra) {
  delete static_cast<NonblockingRun*>(extra);
  return MPI_SUCCESS;
}

int cancelRun(void*, int) { return MPI_SUCCESS; }  // a collective cannot be cancelled: it completes

// The reserved tag of this communicator's next non-blocking call.
int32_t nextTag(CommState& state) {
  return collectives::Communicator::kFirstReservedPlanTag + 1 +
         static_cast<int32_t>(state.nonblockingCalls++ % kNonblockingTags);
}

// Packs what `call` stages, starts `plan` and hands both to a new
// generalized request.
Status launch(Result<collectives::Plan> plan, StagedAlltoallv call, MPI_Comm comm, MPI_Request* request) {
  IBDT_RETURN_IF_ERROR(plan.status());
  IBDT_RETURN_IF_ERROR(call.before(comm));
  IBDT_RETURN_IF_ERROR(plan->start());
  auto run = std::make_unique<NonblockingRun>();
  run->plan = std::move(*plan);
  run->call = std::move(call);
  run->comm = comm;
  if (PMPI_Grequest_start(queryRun, freeRun, cancelRun, run.get(), request) != MPI_SUCCESS) {
    *request = MPI_REQUEST_NULL;
    return makeError(Code::kResource, "mpi: MPI_Grequest_start failed");  // the plan cancels what it posted
  }
  run->request = *request;
  inFlight().push_back(run.release());
  return Status::ok();
}

}  // namespace

bool startIalltoall(CommState& state, const AlltoallArgs& args, MPI_Comm comm, MPI_Request* request, Status& status,
                    std::string& why) {
  Result<StagedAlltoallv> call = stageAlltoall(args, state.comm->size());
  if (!call.isOk()) {
    why = call.status().toString();
    return false;
  }
  *request = MPI_REQUEST_NULL;
  const bool inPlace = args.sendbuf == MPI_IN_PLACE;
  state.comm->pinPlanTag(nextTag(state));
  auto plan = collectives::alltoallInit(*state.comm, call->sendbuf, inPlace ? args.recvcount : args.sendcount,
                                        call->sendtype, call->recvbuf, args.recvcount, call->recvtype, state.alltoall);
  state.comm->unpinPlanTag();
  status = launch(std::move(plan), std::move(*call), comm, request);
  return true;
}

bool startIalltoallv(CommState& state, const AlltoallvArgs& args, MPI_Comm comm, MPI_Request* request, Status& status,
                     std::string& why) {
  Result<StagedAlltoallv> call = stageAlltoallv(args, state.comm->size(), true);
  if (!call.isOk()) {
    why = call.status().toString();
    return false;
  }
  *request = MPI_REQUEST_NULL;
  // ibdt's in-place alltoallv takes three tags (check, control, data) and
  // alternates control and data phases: it takes them from the
  // communicator's counter, like a voted call, not the one reserved tag.
  const bool inPlace = args.sendbuf == MPI_IN_PLACE;
  if (!inPlace) state.comm->pinPlanTag(nextTag(state));
  auto plan =
      collectives::alltoallvInit(*state.comm, call->sendbuf, call->sendcounts, call->sdispls, call->sendtype,
                                 call->recvbuf, call->recvcounts, call->rdispls, call->recvtype, state.alltoallv);
  if (!inPlace) state.comm->unpinPlanTag();
  status = launch(std::move(plan), std::move(*call), comm, request);
  return true;
}

bool nonblockingActive() { return !inFlight().empty(); }

bool progressNonblocking() {
  auto& runs = inFlight();
  bool completed = false;
  for (size_t i = 0; i < runs.size();) {
    NonblockingRun* run = runs[i];
    Result<bool> done = run->plan.test();
    if (done.isOk() && !*done) {
      ++i;
      continue;
    }
    run->outcome = done.isOk() ? run->plan.wait() : done.status();
    if (run->outcome.isOk()) run->outcome = run->call.after(run->comm);
    if (!run->outcome.isOk()) IBDT_LOG(kError, "mpi: MPI_Ialltoall: ", run->outcome.toString());
    runs.erase(runs.begin() + static_cast<std::ptrdiff_t>(i));
    PMPI_Grequest_complete(run->request);  // MPI frees `run` (freeRun) when the program's wait collects it
    completed = true;
  }
  return completed;
}

}  // namespace ibdt::mpi
