// Per-communicator ibdt state kept in a communicator attribute.
#include "mpi/comm_state.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <vector>

#include "base/backoff.h"
#include "base/log.h"
#include "ibdt/fabric.h"

namespace ibdt::mpi {
namespace {

constexpr auto kCloseTimeout = std::chrono::seconds(60);

std::mutex& stateMutex() {
  static std::mutex mutex;
  return mutex;
}
// Live states in creation order: the attribute callback deletes only what
// is still here, so a late callback (MPI_Finalize may delete attributes)
// after closeAllCommStates() is harmless; MPI_Finalize closes them in the
// order every rank created them, since a close waits for the peers' close.
std::vector<CommState*>& liveStates() {
  static std::vector<CommState*> states;
  return states;
}
// The communicator commState() last returned, for recentCommState();
// cleared when that communicator is freed (its handle may be reused).
struct RecentComm {
  MPI_Comm comm = MPI_COMM_NULL;
  CommState* state = nullptr;
};
RecentComm recent;

std::unique_ptr<fabric::Domain>& domain() {
  static std::unique_ptr<fabric::Domain> opened;
  return opened;
}

int deleteState(MPI_Comm, int, void* attribute, void*) {
  std::lock_guard lock(stateMutex());
  auto* state = static_cast<CommState*>(attribute);
  auto found = std::find(liveStates().begin(), liveStates().end(), state);
  if (found == liveStates().end()) return MPI_SUCCESS;
  liveStates().erase(found);
  if (recent.state == state) recent = RecentComm{};
  delete state;
  return MPI_SUCCESS;
}

Result<int> commKeyval() {
  static int keyval = MPI_KEYVAL_INVALID;
  if (keyval == MPI_KEYVAL_INVALID &&
      PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, deleteState, &keyval, nullptr) != MPI_SUCCESS) {
    return makeError(Code::kResource, "mpi: MPI_Comm_create_keyval failed");
  }
  return keyval;
}

// The smallest spin budget of the Contexts set up so far (none: the
// maximum). A process whose node holds more ranks than cores in some
// communicator shares its core whichever communicator it then waits on:
// a MPI_COMM_SELF Context set up later (a budget of 4096: one local rank)
// made the bridge's waits on a 4-rank world spin, holding the core the
// peers needed, 3.5 ms per persistent 8-byte alltoall against 15 us.
uint32_t& leastWaitSpins() {
  static uint32_t spins = UINT32_MAX;
  return spins;
}

Result<fabric::Domain*> processDomain() {
  if (!domain()) {
    // The tag only names this process's shared segments.
    IBDT_ASSIGN_OR_RETURN(domain(), fabric::openDomain("auto", {strCat("mpi-", getpid()), ""}));
  }
  return domain().get();
}

Result<std::unique_ptr<CommState>> createState(MPI_Comm comm) {
  auto state = std::make_unique<CommState>();
  IBDT_ASSIGN_OR_RETURN(state->alltoall, collectives::alltoallOptionsFromEnvironment());
  IBDT_ASSIGN_OR_RETURN(state->alltoallv, collectives::alltoallvOptionsFromEnvironment());
  IBDT_ASSIGN_OR_RETURN(fabric::Domain * opened, processDomain());
  IBDT_ASSIGN_OR_RETURN(state->store, MpiStore::create(comm));
  IBDT_ASSIGN_OR_RETURN(messaging::Options options, messaging::optionsFromEnvironment());
  IBDT_ASSIGN_OR_RETURN(state->context,
                        messaging::Context::create(*opened, *state->store, options, Deadline::never()));
  IBDT_ASSIGN_OR_RETURN(state->comm,
                        collectives::Communicator::create(*state->context, *state->store, Deadline::never()));
  leastWaitSpins() = std::min(leastWaitSpins(), state->context->waitSpins());
  return state;
}

}  // namespace

uint32_t bridgeWaitSpins() { return leastWaitSpins() == UINT32_MAX ? Backoff::kSpins : leastWaitSpins(); }

CommState::~CommState() {
  alltoallPlans.clear();  // their persistent requests belong to the Context
  directWritePlans.clear();
  ialltoallPlans.clear();  // (a run still in flight holds its own)
  ialltoallvPlans.clear();
  stagedIalltoallPlans.clear();
  lastAlltoallv = AlltoallvCache{};
  if (context && !context->closed()) {
    if (Status closed = context->close(Deadline::after(kCloseTimeout)); !closed.isOk()) {
      IBDT_LOG(kWarn, "mpi: closing a communicator's ibdt context: ", closed.toString());
    }
  }
}

Result<CommState*> commState(MPI_Comm comm) {
  IBDT_ASSIGN_OR_RETURN(int keyval, commKeyval());
  void* attribute = nullptr;
  int present = 0;
  if (PMPI_Comm_get_attr(comm, keyval, &attribute, &present) != MPI_SUCCESS) {
    return makeError(Code::kInvalidArgument, "mpi: MPI_Comm_get_attr rejects the communicator");
  }
  if (present) {
    if (attribute == nullptr) return makeError(Code::kUnsupported, "mpi: ibdt setup failed earlier on this communicator");
    recent = RecentComm{comm, static_cast<CommState*>(attribute)};
    return recent.state;
  }
  auto created = createState(comm);
  int mine = created.isOk() ? 1 : 0, all = 0;
  PMPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm);
  if (!all) {
    // Remember the failure (a null attribute) so later calls go to MPI at once.
    PMPI_Comm_set_attr(comm, keyval, nullptr);
    if (!created.isOk()) return created.status();
    return makeError(Code::kUnsupported, "mpi: ibdt setup failed on another rank of the communicator");
  }
  CommState* state = created->release();
  {
    std::lock_guard lock(stateMutex());
    liveStates().push_back(state);
  }
  PMPI_Comm_set_attr(comm, keyval, state);
  recent = RecentComm{comm, state};
  return state;
}

CommState* recentCommState(MPI_Comm comm) { return recent.comm == comm ? recent.state : nullptr; }

void closeAllCommStates() {
  std::vector<CommState*> states;
  {
    std::lock_guard lock(stateMutex());
    states.swap(liveStates());
    recent = RecentComm{};
  }
  for (CommState* state : states) delete state;
  domain().reset();
}

}  // namespace ibdt::mpi
