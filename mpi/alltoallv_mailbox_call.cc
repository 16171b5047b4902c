// MPI_Alltoallv through the communicator's mailbox (see the header).
#include "mpi/alltoallv_mailbox_call.h"

#include "collectives/alltoallv_mailbox_calls.h"
#include "mpi/comm_state.h"
#include "mpi/staging.h"
#include "mpi/type_convert.h"

namespace ibdt::mpi {
namespace {

// The communicator's mailbox (collectives/alltoallv_mailbox_calls.h), made
// by the first call, or null alike on every rank.
collectives::AlltoallvMailbox* mailboxOf(CommState& state) {
  collectives::Communicator& comm = *state.comm;
  if (state.alltoallv.algorithm != collectives::AlltoallvAlgorithm::kAuto || comm.nodeCount() != 1 ||
      comm.size() < 2) {
    return nullptr;
  }
  return collectives::communicatorMailbox(comm, state.alltoallv.inplaceBytes, Deadline::never());
}

collectives::MailboxCall prepare(CommState& state, const StagedAlltoallv& call) {
  return collectives::MailboxCall::prepare(collectives::checkAlltoallvArgs(
      *state.comm, call.sendbuf, call.sendcounts, call.sdispls, call.sendtype, call.recvbuf, call.recvcounts,
      call.rdispls, call.recvtype));
}

}  // namespace

bool runThroughMailbox(CommState& state, const AlltoallvArgs& args, MPI_Comm comm, Status& status) {
  collectives::AlltoallvMailbox* mailbox = mailboxOf(state);
  if (mailbox == nullptr) return false;
  const int p = state.comm->size();
  const uint64_t typesFreed = convertedTypesFreed();
  Status outcome;
  Result<bool> ran = false;
  if (state.mailboxCall && repeatsAlltoallv(state.mailboxKey, args, p, typesFreed)) {
    ran = mailbox->run(*state.mailboxCall, Deadline::never(), outcome);
  } else {
    // A type without an ibdt signature goes to MPI on every rank alike
    // (a correct program's signatures match): none runs the mailbox.
    Result<StagedAlltoallv> call = stageAlltoallv(args, p, args.sendbuf == MPI_IN_PLACE);
    if (!call.isOk()) return false;
    state.mailboxCall.reset();
    if (call->staged()) {  // the staging buffers live for this call only
      Status packed = call->before(comm);
      collectives::MailboxCall prepared =
          packed.isOk() ? prepare(state, *call) : collectives::MailboxCall::prepare(packed);
      ran = mailbox->run(prepared, Deadline::never(), outcome);
      if (ran.isOk() && *ran && outcome.isOk()) outcome = call->after(comm);
    } else {
      state.mailboxCall = std::make_unique<collectives::MailboxCall>(prepare(state, *call));
      state.mailboxKey = alltoallvKey(args, p, typesFreed);
      ran = mailbox->run(*state.mailboxCall, Deadline::never(), outcome);
    }
  }
  if (!ran.isOk()) {
    status = ran.status();
    return true;
  }
  if (*ran) status = outcome;
  return *ran;
}

}  // namespace ibdt::mpi
