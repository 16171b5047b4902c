// mpi/comm_state.h — ibdt's state for one MPI communicator: a Store over a
// duplicate of it, a messaging Context over that Store (on the process's one
// fabric Domain) and the world Communicator of that Context. Created on the
// first intercepted collective on the communicator (collective), kept in a
// communicator attribute whose delete callback closes it when the
// communicator is freed; MPI_Finalize closes whatever is left.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <optional>

#include "collectives/alltoallv_mailbox.h"
#include "collectives/checked_alltoallv.h"
#include "collectives/ialltoall_mailbox.h"
#include "ibdt/collectives.h"
#include "ibdt/messaging.h"
#include "ibdt/status.h"
#include "mpi/alltoall_call.h"
#include "mpi/alltoallv_call.h"
#include "mpi/direct_write_call.h"
#include "mpi/mpi_store.h"
#include "mpi/nonblocking.h"
#include "mpi/tagged_plans.h"

namespace ibdt::mpi {

class PreparedIalltoallv;

struct CommState {
  std::unique_ptr<MpiStore> store;
  std::unique_ptr<messaging::Context> context;
  std::unique_ptr<collectives::Communicator> comm;
  collectives::AlltoallOptions alltoall;
  collectives::AlltoallvOptions alltoallv;
  AlltoallCache alltoallPlans{8};  // destroyed before the Context they run on
  // The blocking alltoall's direct-write plans, per block size (mpi/direct_write_call.h).
  DirectWritePlans directWritePlans{4};
  // MPI_Ialltoall's plans: every reserved tag of two argument sets (mpi/nonblocking.h).
  AlltoallCache ialltoallPlans{2 * kNonblockingTags};
  // MPI_Ialltoall's call mailbox on one node (collectives/ialltoall_mailbox.h),
  // made by the communicator's first MPI_Ialltoall: null if it could not be.
  std::shared_ptr<collectives::IalltoallMailbox> ialltoallMailbox;
  bool ialltoallMailboxTried = false;
  // The last converted mailbox call's MPI arguments and their check: a call
  // that repeats them (no converted type freed since) skips the conversion
  // and the check, which cost more than the call's own work.
  struct CheckedMailboxCall {
    AlltoallArgs args{};
    uint64_t typesFreed = 0;
    std::optional<collectives::AlltoallArgs> checked;
  };
  CheckedMailboxCall lastMailboxCall;
  // The MPI_Ialltoallv call last prepared for that mailbox (repeated
  // arguments run it again; mpi/ialltoallv_prepared.h).
  std::shared_ptr<PreparedIalltoallv> preparedIalltoallv;
  // An MPI_Ialltoall too large for a row, as alltoallv counts and
  // displacements (sendcounts, sdispls, recvcounts, rdispls; p each).
  std::vector<int> ialltoallAsV;
  // The non-blocking alltoallv's and the staged MPI_Ialltoall's plans (mpi/tagged_plans.h).
  TaggedPlans<AlltoallvCache::Key> ialltoallvPlans;
  TaggedPlans<StagedAlltoallKey> stagedIalltoallPlans;
  // Their pairs last checked and calls so far, as for the blocking alltoallv below.
  std::shared_ptr<collectives::PairCheckHistory> ialltoallvPairs = std::make_shared<collectives::PairCheckHistory>();
  int64_t ialltoallvCalls = 0;
  AlltoallvCache lastAlltoallv;
  // The blocking alltoallv's pairs last checked (collectives/checked_alltoallv.h).
  std::shared_ptr<collectives::PairCheckHistory> alltoallvPairs = std::make_shared<collectives::PairCheckHistory>();
  // Blocking MPI_Alltoallv calls so far: alike on every rank (ordered
  // collectives), sent with the pair checks to recognise stale ones.
  int64_t alltoallvCalls = 0;
  // Whether the blocking alltoall's blocks of the last size asked take a
  // direct-write plan (mpi/alltoall_call.cc, mpi/direct_write_call.h).
  struct DirectWriteChoice {
    int64_t blockBytes = -1;
    bool chosen = false;
    // direct-write or shared-memory: both collective inits whose plans move
    // to other buffers alone (Plan::rebind).
    collectives::AlltoallAlgorithm algorithm = collectives::AlltoallAlgorithm::kDirectWrite;
  };
  DirectWriteChoice directWriteChoice;
  // The call last prepared for the communicator's mailbox
  // (mpi/alltoallv_mailbox_call.h) and the arguments it was prepared for.
  std::unique_ptr<collectives::MailboxCall> mailboxCall;
  AlltoallvCache::Key mailboxKey;
  uint64_t nonblockingCalls = 0;  // MPI_Ialltoall(v) calls taken (not in-place alltoallv): their tags (mpi/nonblocking.h)
  ~CommState();  // closes the Context (its peers are freeing the communicator too)
};

// The state of intracommunicator `comm`, set up on first use. Collective on
// first use: every rank learns whether every rank succeeded, so that either
// all or none of them take ibdt's path (an error on one rank fails all).
Result<CommState*> commState(MPI_Comm comm);

// The state of `comm` if it is the communicator commState() last returned
// (and still lives), else null: no MPI call.
CommState* recentCommState(MPI_Comm comm);

// The spin budget of the bridge's waits: the least waitSpins() of the
// Contexts set up so far (Backoff::kSpins before any).
uint32_t bridgeWaitSpins();

// Closes every state and the Domain (from MPI_Finalize, before PMPI_Finalize).
void closeAllCommStates();

}  // namespace ibdt::mpi
