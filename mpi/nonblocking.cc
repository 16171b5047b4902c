// Non-blocking alltoall on ibdt behind generalized requests (see the header).
#include "mpi/nonblocking.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "base/log.h"
#include "mpi/comm_state.h"
#include "mpi/staging.h"
#include "mpi/type_convert.h"

namespace ibdt::mpi {
namespace {

// One run in flight, owned by its generalized request (returned to the
// spare runs by free_fn). Its plan may be shared with the communicator's
// cache (AlltoallCache), which does not hand it out until the run lets go.
struct NonblockingRun {
  AlltoallCache::PlanPtr plan;
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

// Runs whose requests MPI freed, for the next calls: a repeated call
// allocates nothing of its own.
std::vector<std::unique_ptr<NonblockingRun>>& spareRuns() {
  static std::vector<std::unique_ptr<NonblockingRun>> spares;
  return spares;
}

std::unique_ptr<NonblockingRun> newRun() {
  auto& spares = spareRuns();
  if (spares.empty()) return std::make_unique<NonblockingRun>();
  std::unique_ptr<NonblockingRun> run = std::move(spares.back());
  spares.pop_back();
  return run;
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
  std::unique_ptr<NonblockingRun> run(static_cast<NonblockingRun*>(extra));
  run->plan.reset();
  run->call = StagedAlltoallv{};
  run->outcome = Status::ok();
  spareRuns().push_back(std::move(run));
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
Status launch(AlltoallCache::PlanPtr plan, StagedAlltoallv call, MPI_Comm comm, MPI_Request* request) {
  IBDT_RETURN_IF_ERROR(call.before(comm));
  IBDT_RETURN_IF_ERROR(plan->start());
  std::unique_ptr<NonblockingRun> run = newRun();
  run->plan = std::move(plan);
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

Status launch(Result<collectives::Plan> plan, StagedAlltoallv call, MPI_Comm comm, MPI_Request* request) {
  IBDT_RETURN_IF_ERROR(plan.status());
  return launch(std::make_shared<collectives::Plan>(std::move(*plan)), std::move(call), comm, request);
}

// Both sides' types of a call whose types convert (as a repeated call's did).
Result<std::pair<datatype::Datatype, datatype::Datatype>> convertBoth(const AlltoallArgs& args) {
  IBDT_ASSIGN_OR_RETURN(datatype::Datatype recv, convertType(args.recvtype));
  if (args.sendbuf == MPI_IN_PLACE) return std::pair{recv, recv};
  IBDT_ASSIGN_OR_RETURN(datatype::Datatype send, convertType(args.sendtype));
  return std::pair{std::move(send), std::move(recv)};
}

// Both types converted (`types`, or as in the previous call when null): the
// plan this communicator built for these arguments on the key's tag (its
// first calls build one per reserved tag), else a new one, kept for the call
// that comes back to that tag.
Status launchCached(CommState& state, const AlltoallArgs& args, const AlltoallCache::Key& key, MPI_Comm comm,
                    MPI_Request* request, const std::pair<datatype::Datatype, datatype::Datatype>* types) {
  AlltoallCache& cache = state.ialltoallPlans;
  const AlltoallCache::PlanPtr* plan = cache.find(key);
  if (plan == nullptr) {
    Result<std::pair<datatype::Datatype, datatype::Datatype>> converted = types ? *types : convertBoth(args);
    IBDT_RETURN_IF_ERROR(converted.status());
    const auto& [send, recv] = *converted;
    const bool inPlace = args.sendbuf == MPI_IN_PLACE;
    state.comm->pinPlanTag(key.tag);
    auto built = collectives::alltoallInit(*state.comm, inPlace ? collectives::kInPlace : args.sendbuf,
                                           inPlace ? args.recvcount : args.sendcount, send, args.recvbuf,
                                           args.recvcount, recv, state.alltoall);
    state.comm->unpinPlanTag();
    IBDT_RETURN_IF_ERROR(built.status());
    ++cache.built;
    plan = &cache.insert(key, std::move(*built));
  }
  cache.remember(args, convertedTypesFreed(), key, *plan);
  return launch(*plan, StagedAlltoallv{}, comm, request);
}

}  // namespace

bool startIalltoall(CommState& state, const AlltoallArgs& args, MPI_Comm comm, MPI_Request* request, Status& status,
                    std::string& why) {
  *request = MPI_REQUEST_NULL;
  if (const AlltoallCache::Last* last = state.ialltoallPlans.repeated(args, convertedTypesFreed()); last != nullptr) {
    AlltoallCache::Key key = last->key;
    key.tag = nextTag(state);
    status = launchCached(state, args, key, comm, request, nullptr);
    return true;
  }
  if (auto types = convertBoth(args); types.isOk()) {
    const AlltoallCache::Key key = alltoallKey(args, types->first, types->second, nextTag(state));
    status = launchCached(state, args, key, comm, request, &*types);
    return true;
  }
  Result<StagedAlltoallv> call = stageAlltoall(args, state.comm->size());
  if (!call.isOk()) {
    why = call.status().toString();
    return false;
  }
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
    Result<bool> done = run->plan->test();
    if (done.isOk() && !*done) {
      ++i;
      continue;
    }
    run->outcome = done.isOk() ? run->plan->wait() : done.status();
    if (run->outcome.isOk()) run->outcome = run->call.after(run->comm);
    if (!run->outcome.isOk()) IBDT_LOG(kError, "mpi: MPI_Ialltoall: ", run->outcome.toString());
    run->plan.reset();  // a cached plan may now be started by another call
    runs.erase(runs.begin() + static_cast<std::ptrdiff_t>(i));
    PMPI_Grequest_complete(run->request);  // MPI frees `run` (freeRun) when the program's wait collects it
    completed = true;
  }
  return completed;
}

}  // namespace ibdt::mpi
