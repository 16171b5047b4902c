// Non-blocking alltoall on ibdt behind generalized requests (see the header).
#include "mpi/nonblocking.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "base/log.h"
#include "collectives/alltoall_args.h"
#include "collectives/ialltoall_mailbox.h"
#include "mpi/comm_state.h"
#include "mpi/ialltoallv_prepared.h"
#include "mpi/staging.h"
#include "mpi/tagged_plans.h"
#include "mpi/type_convert.h"

namespace ibdt::mpi {
namespace {

// One run in flight, owned by its generalized request (returned to the
// spare runs by free_fn). Its plan may be shared with the communicator's
// caches (AlltoallCache, TaggedPlans), which do not hand it out until the
// run lets go; a staged plan's buffers come with it (`staging`, owned by
// the StagedPlan that `plan` points into).
struct NonblockingRun {
  AlltoallCache::PlanPtr plan;
  StagedAlltoallv* staging = nullptr;  // unpacked when the run is done
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
  run->staging = nullptr;
  run->outcome = Status::ok();
  spareRuns().push_back(std::move(run));
  return MPI_SUCCESS;
}

int cancelRun(void*, int) { return MPI_SUCCESS; }  // a collective cannot be cancelled: it completes

// The reserved tag slot of this communicator's next non-blocking call.
int nextSlot(CommState& state) { return static_cast<int>(state.nonblockingCalls++ % kNonblockingTags); }
int32_t nextTag(CommState& state) { return nonblockingTag(nextSlot(state)); }

// Packs what `staging` stages (if any), starts `plan` and hands both to a
// new generalized request.
Status launch(AlltoallCache::PlanPtr plan, StagedAlltoallv* staging, MPI_Comm comm, MPI_Request* request,
              bool packed = false) {
  if (staging != nullptr && !packed) IBDT_RETURN_IF_ERROR(staging->before(comm));
  IBDT_RETURN_IF_ERROR(plan->start());
  std::unique_ptr<NonblockingRun> run = newRun();
  run->plan = std::move(plan);
  run->staging = staging;
  run->comm = comm;
  if (PMPI_Grequest_start(queryRun, freeRun, cancelRun, run.get(), request) != MPI_SUCCESS) {
    *request = MPI_REQUEST_NULL;
    // The run goes on (the peers take part, and a mailbox call reads and
    // writes the buffers): finish it before its buffers may go.
    (void)run->plan->wait();
    return makeError(Code::kResource, "mpi: MPI_Grequest_start failed");
  }
  run->request = *request;
  inFlight().push_back(run.release());
  return Status::ok();
}

Status launch(const StagedPlanPtr& staged, MPI_Comm comm, MPI_Request* request) {
  StagedAlltoallv* staging = staged->call.staged() ? &staged->call : nullptr;
  return launch(AlltoallCache::PlanPtr(staged, &staged->plan), staging, comm, request);
}

// The plan built by `build` on `call`'s buffers, with them.
template <class Build>
Result<StagedPlanPtr> stagedPlan(StagedAlltoallv call, Build&& build) {
  auto staged = std::make_shared<StagedPlan>(StagedPlan{collectives::Plan{}, std::move(call)});
  IBDT_ASSIGN_OR_RETURN(staged->plan, build(staged->call));
  return staged;
}

// The plan of `plans` for `slot`, else the one `build` makes (kept there).
template <class Key, class Build>
Status launchTagged(TaggedPlans<Key>& plans, int slot, MPI_Comm comm, MPI_Request* request, Build&& build) {
  StagedPlanPtr plan = plans.find(slot);
  if (plan == nullptr) {
    IBDT_ASSIGN_OR_RETURN(plan, build());
    plans.keep(slot, plan);
  }
  return launch(plan, comm, request);
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
  return launch(*plan, nullptr, comm, request);
}

// A side ibdt cannot lay out: staged, the plan kept per tag while the
// calls repeat these arguments (`repeated`: those of the previous staged call).
bool startStagedIalltoall(CommState& state, const AlltoallArgs& args, const StagedAlltoallKey& key, bool repeated,
                          MPI_Comm comm, MPI_Request* request, Status& status, std::string& why) {
  TaggedPlans<StagedAlltoallKey>& plans = state.stagedIalltoallPlans;
  Result<StagedAlltoallv> call = repeated ? StagedAlltoallv{} : stageAlltoall(args, state.comm->size());
  if (!call.isOk()) {  // no signature in ibdt: alike on every rank of a correct program
    why = call.status().toString();
    return false;
  }
  if (!repeated) plans.reset(key);
  const int slot = nextSlot(state);
  status = launchTagged(plans, slot, comm, request, [&]() -> Result<StagedPlanPtr> {
    if (repeated) {
      IBDT_ASSIGN_OR_RETURN(*call, stageAlltoall(args, state.comm->size()));
    }
    return stagedPlan(std::move(*call), [&](const StagedAlltoallv& staged) {
      const bool inPlace = args.sendbuf == MPI_IN_PLACE;
      PinnedTag pinned(*state.comm, nonblockingTag(slot));
      return collectives::alltoallInit(*state.comm, staged.sendbuf, inPlace ? args.recvcount : args.sendcount,
                                       staged.sendtype, staged.recvbuf, args.recvcount, staged.recvtype,
                                       state.alltoall);
    });
  });
  return true;
}

// The communicator's call mailbox: made by its first MPI_Ialltoall or
// MPI_Ialltoallv, which every rank makes at the same point of its calls
// (collective), where the communicator spans one node and the alltoall's
// or the alltoallv's algorithm is auto (each call kind takes it only when
// its own is); else null, alike on every rank. Rows hold the in-place
// budget (IBDT_ALLTOALLV_INPLACE_BYTES, 1 MiB) over the mailbox's phases:
// 256 KiB of a rank's blocks per call.
collectives::IalltoallMailbox* ialltoallMailboxOf(CommState& state) {
  if (state.ialltoallMailboxTried) return state.ialltoallMailbox.get();
  state.ialltoallMailboxTried = true;
  collectives::Communicator& comm = *state.comm;
  const bool wanted = state.alltoall.algorithm == collectives::AlltoallAlgorithm::kAuto ||
                      state.alltoallv.algorithm == collectives::AlltoallvAlgorithm::kAuto;
  if (!wanted || comm.nodeCount() != 1 || comm.size() < 2) return nullptr;
  auto made = collectives::IalltoallMailbox::create(
      comm, state.alltoallv.inplaceBytes / collectives::IalltoallMailbox::kPhases, Deadline::never());
  if (made.isOk()) {
    state.ialltoallMailbox = std::move(*made);
  } else {
    IBDT_LOG(kDebug, "mpi: MPI_Ialltoall without its mailbox: ", made.status().toString());
  }
  return state.ialltoallMailbox.get();
}

// Whether this call's blocks fit the mailbox's rows: decided from the
// block's MPI size, the same on every rank of a correct program, whatever
// types convert here.
bool fitsMailbox(const collectives::IalltoallMailbox& box, const AlltoallArgs& args, int p) {
  const std::optional<int64_t> blockBytes = mpiBlockBytes(args);
  return blockBytes && args.recvcount >= 0 && *blockBytes * p <= box.capacity();
}

// The next mailbox call with this call's arguments, started: the converted
// types, or a side ibdt has no layout for staged (packed by MPI), so that
// every rank takes the mailbox whatever its types. False (with `why`) only
// when a type has no ibdt signature at all: alike on every rank, to MPI.
bool launchThroughMailbox(CommState& state, const AlltoallArgs& args, MPI_Comm comm, MPI_Request* request,
                          Status& status, std::string& why) {
  collectives::IalltoallMailbox& box = *state.ialltoallMailbox;
  const bool inPlace = args.sendbuf == MPI_IN_PLACE;
  const int64_t sendcount = inPlace ? args.recvcount : args.sendcount;
  // The plan belongs to the mailbox: the run holds the mailbox, no allocation.
  auto launchNext = [&](const Result<collectives::AlltoallArgs>& checked) {
    auto plan = box.next(checked);
    status = plan.isOk() ? launch(AlltoallCache::PlanPtr(state.ialltoallMailbox, *plan), nullptr, comm, request)
                         : plan.status();
    return true;
  };
  CommState::CheckedMailboxCall& last = state.lastMailboxCall;
  const uint64_t typesFreed = convertedTypesFreed();
  if (last.checked && last.args == args && last.typesFreed == typesFreed) return launchNext(*last.checked);
  last.checked.reset();
  if (auto types = convertBoth(args); types.isOk()) {
    auto checked = collectives::checkAlltoallArgs(*state.comm, inPlace ? collectives::kInPlace : args.sendbuf,
                                                  sendcount, types->first, args.recvbuf, args.recvcount,
                                                  types->second);
    if (checked.isOk()) last = {args, typesFreed, *checked};
    return launchNext(checked);
  }
  struct StagedCall {
    std::shared_ptr<collectives::IalltoallMailbox> box;
    StagedAlltoallv staged;
  };
  Result<StagedAlltoallv> staged = stageAlltoall(args, state.comm->size());
  if (!staged.isOk()) {
    why = staged.status().toString();
    return false;
  }
  auto held = std::make_shared<StagedCall>(StagedCall{state.ialltoallMailbox, std::move(*staged)});
  StagedAlltoallv& call = held->staged;
  // Packed before the call takes its number: a failed pack still runs the
  // call, refused, so that the peers learn it instead of waiting.
  Status packed = call.before(comm);
  auto checked = packed.isOk() ? collectives::checkAlltoallArgs(*state.comm, call.sendbuf, sendcount, call.sendtype,
                                                                call.recvbuf, args.recvcount, call.recvtype)
                               : Result<collectives::AlltoallArgs>(packed);
  auto plan = box.next(checked);
  StagedAlltoallv* staging = call.staged() && packed.isOk() ? &call : nullptr;
  status = plan.isOk() ? launch(AlltoallCache::PlanPtr(held, *plan), staging, comm, request, true) : plan.status();
  return true;
}

// The next mailbox call of an MPI_Ialltoallv (not in place), started: the
// call prepared before while the arguments repeat, else prepared now.
// False (with `why`) only when a type has no ibdt signature at all: alike
// on every rank, to MPI.
bool launchVThroughMailbox(CommState& state, const AlltoallvArgs& args, MPI_Comm comm, MPI_Request* request,
                           Status& status, std::string& why) {
  const uint64_t ticket = PreparedIalltoallv::ticket(nextSlot(state), state.ialltoallvCalls++);
  std::shared_ptr<PreparedIalltoallv> prepared = state.preparedIalltoallv;
  if (!prepared || !prepared->repeatedBy(args, state.comm->size(), convertedTypesFreed())) {
    auto made = PreparedIalltoallv::prepare(state, args, comm);
    if (!made.isOk()) {
      why = made.status().toString();
      return false;
    }
    prepared = std::move(*made);
    state.preparedIalltoallv = prepared->staging() == nullptr ? prepared : nullptr;
  }
  auto plan = state.ialltoallMailbox->nextV(prepared->call(), prepared, ticket);
  status = plan.isOk() ? launch(AlltoallCache::PlanPtr(prepared, *plan), prepared->staging(), comm, request, true)
                       : plan.status();
  return true;
}

// An MPI_Ialltoall whose p blocks do not fit a row, run as the
// MPI_Ialltoallv of the same blocks (equal counts, block i at i x count):
// through the mailbox its dense blocks are lent (single copy), and a call
// some rank cannot lend runs by messages (the alltoallv's fallback).
// Alike on every rank: the block's MPI size and the node's single-copy
// size (agreed when the mailbox was made) decide; p x bytes within int bounds every count and
// displacement (an element has a byte at least).
bool routesAsAlltoallv(const collectives::IalltoallMailbox& box, const AlltoallArgs& args, int p) {
  const std::optional<int64_t> blockBytes = mpiBlockBytes(args);
  return blockBytes && args.sendbuf != MPI_IN_PLACE && box.takesAlltoallv() &&
         box.singleCopy().byAddress(*blockBytes) && *blockBytes * p <= std::numeric_limits<int>::max();
}

bool launchAsAlltoallv(CommState& state, const AlltoallArgs& args, MPI_Comm comm, MPI_Request* request,
                       Status& status, std::string& why) {
  const int p = state.comm->size();
  std::vector<int>& v = state.ialltoallAsV;
  v.resize(4 * static_cast<size_t>(p));
  for (int i = 0; i < p; ++i) {
    v[static_cast<size_t>(i)] = args.sendcount;
    v[static_cast<size_t>(p + i)] = i * args.sendcount;
    v[static_cast<size_t>(2 * p + i)] = args.recvcount;
    v[static_cast<size_t>(3 * p + i)] = i * args.recvcount;
  }
  const AlltoallvArgs asV{args.sendbuf, v.data(),        v.data() + p,    args.sendtype,
                          args.recvbuf, v.data() + 2 * p, v.data() + 3 * p, args.recvtype};
  return launchVThroughMailbox(state, asV, comm, request, status, why);
}

}  // namespace

bool startIalltoall(CommState& state, const AlltoallArgs& args, MPI_Comm comm, MPI_Request* request, Status& status,
                    std::string& why) {
  *request = MPI_REQUEST_NULL;
  if (const auto* box = ialltoallMailboxOf(state); box != nullptr &&
                                                   state.alltoall.algorithm == collectives::AlltoallAlgorithm::kAuto &&
                                                   fitsMailbox(*box, args, state.comm->size())) {
    return launchThroughMailbox(state, args, comm, request, status, why);
  }
  if (const auto* box = ialltoallMailboxOf(state); box != nullptr &&
                                                   state.alltoall.algorithm == collectives::AlltoallAlgorithm::kAuto &&
                                                   routesAsAlltoallv(*box, args, state.comm->size())) {
    return launchAsAlltoallv(state, args, comm, request, status, why);
  }
  const uint64_t typesFreed = convertedTypesFreed();
  if (const AlltoallCache::Last* last = state.ialltoallPlans.repeated(args, typesFreed); last != nullptr) {
    AlltoallCache::Key key = last->key;
    key.tag = nextTag(state);
    status = launchCached(state, args, key, comm, request, nullptr);
    return true;
  }
  // The previous staged call's arguments: staged again, without trying
  // to convert its types (a failed conversion builds its error message).
  const StagedAlltoallKey stagedKey{args, typesFreed};
  if (state.stagedIalltoallPlans.key() == stagedKey) {
    return startStagedIalltoall(state, args, stagedKey, true, comm, request, status, why);
  }
  if (auto types = convertBoth(args); types.isOk()) {
    const AlltoallCache::Key key = alltoallKey(args, types->first, types->second, nextTag(state));
    status = launchCached(state, args, key, comm, request, &*types);
    return true;
  }
  return startStagedIalltoall(state, args, stagedKey, false, comm, request, status, why);
}

bool startIalltoallv(CommState& state, const AlltoallvArgs& args, MPI_Comm comm, MPI_Request* request, Status& status,
                     std::string& why) {
  *request = MPI_REQUEST_NULL;
  const int p = state.comm->size();
  const bool inPlace = args.sendbuf == MPI_IN_PLACE;
  if (const auto* box = ialltoallMailboxOf(state); box != nullptr && box->takesAlltoallv() && !inPlace &&
                                                   state.alltoallv.algorithm == collectives::AlltoallvAlgorithm::kAuto) {
    return launchVThroughMailbox(state, args, comm, request, status, why);
  }
  TaggedPlans<AlltoallvCache::Key>& plans = state.ialltoallvPlans;
  const uint64_t typesFreed = convertedTypesFreed();
  const bool repeated = !inPlace && plans.key() && repeatsAlltoallv(*plans.key(), args, p, typesFreed);
  // A repeated call's arguments staged before (its staging is its plan's).
  Result<StagedAlltoallv> call = repeated ? StagedAlltoallv{} : stageAlltoallv(args, p, true);
  if (!call.isOk()) {  // no signature in ibdt: alike on every rank of a correct program
    why = call.status().toString();
    return false;
  }
  if (inPlace) {
    // ibdt's in-place alltoallv takes three tags (check, control, data) and
    // alternates control and data phases: it takes them from the
    // communicator's counter, like a voted call, not one reserved tag, so
    // every rank builds its plan in every call (a rank reusing one would
    // not advance its counter).
    status = [&]() -> Status {
      IBDT_ASSIGN_OR_RETURN(StagedPlanPtr plan, stagedPlan(std::move(*call), [&](const StagedAlltoallv& staged) {
                              return collectives::alltoallvInit(*state.comm, collectives::kInPlace, staged.sendcounts,
                                                                staged.sdispls, staged.sendtype, staged.recvbuf,
                                                                staged.recvcounts, staged.rdispls, staged.recvtype,
                                                                state.alltoallv);
                            }));
      return launch(plan, comm, request);
    }();
    return true;
  }
  if (!repeated) plans.reset(alltoallvKey(args, p, typesFreed));
  const int slot = nextSlot(state);
  const int64_t callNumber = state.ialltoallvCalls++;
  status = launchTagged(plans, slot, comm, request, [&]() -> Result<StagedPlanPtr> {
    if (repeated) {
      IBDT_ASSIGN_OR_RETURN(*call, stageAlltoallv(args, p, true));
    }
    return stagedPlan(std::move(*call), [&](const StagedAlltoallv& staged) {
      PinnedTag pinned(*state.comm, nonblockingTag(slot));
      return checkedAlltoallvPlan(state, staged, kNonblockingCheckTag, callNumber, state.ialltoallvPairs);
    });
  });
  return true;
}

bool nonblockingActive() { return !inFlight().empty(); }

bool progressNonblocking(bool& progressed) {
  auto& runs = inFlight();
  bool completed = false;
  for (size_t i = 0; i < runs.size();) {
    NonblockingRun* run = runs[i];
    bool moved = false;
    Result<bool> done = run->plan->test(&moved);
    progressed = progressed || moved;
    if (done.isOk() && !*done) {
      ++i;
      continue;
    }
    run->outcome = done.isOk() ? run->plan->wait() : done.status();
    if (run->outcome.isOk() && run->staging != nullptr) run->outcome = run->staging->after(run->comm);
    if (!run->outcome.isOk()) IBDT_LOG(kError, "mpi: MPI_Ialltoall: ", run->outcome.toString());
    run->plan.reset();  // a cached plan may now be started by another call
    runs.erase(runs.begin() + static_cast<std::ptrdiff_t>(i));
    PMPI_Grequest_complete(run->request);  // MPI frees `run` (freeRun) when the program's wait collects it
    completed = true;
  }
  return completed;
}

}  // namespace ibdt::mpi
