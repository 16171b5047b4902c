// An MPI_Ialltoallv call prepared for the call mailbox (see the header).
#include "mpi/ialltoallv_prepared.h"

#include <utility>

#include "collectives/alltoallv_args.h"
#include "mpi/comm_state.h"
#include "mpi/nonblocking.h"
#include "mpi/type_convert.h"

namespace ibdt::mpi {
namespace {

constexpr int kSlotBits = 8;
static_assert(kNonblockingTags < (1 << kSlotBits));

}  // namespace

Result<std::shared_ptr<PreparedIalltoallv>> PreparedIalltoallv::prepare(CommState& state, const AlltoallvArgs& args,
                                                                        MPI_Comm comm) {
  const int p = state.comm->size();
  const uint64_t typesFreed = convertedTypesFreed();
  IBDT_ASSIGN_OR_RETURN(StagedAlltoallv staged, stageAlltoallv(args, p, false));
  std::shared_ptr<PreparedIalltoallv> prepared(new PreparedIalltoallv(state, std::move(staged)));
  prepared->box_ = state.ialltoallMailbox;
  StagedAlltoallv& call = prepared->staged_;
  // Packed before the call takes its number: a failed pack still runs the
  // call, refused, so that the peers learn it instead of waiting.
  Status packed = call.staged() ? call.before(comm) : Status::ok();
  auto checked = packed.isOk() ? collectives::checkAlltoallvArgs(*state.comm, call.sendbuf, call.sendcounts,
                                                                 call.sdispls, call.sendtype, call.recvbuf,
                                                                 call.recvcounts, call.rdispls, call.recvtype)
                               : Result<collectives::AlltoallvArgs>(packed);
  prepared->call_ = std::make_shared<const collectives::MailboxCall>(
      collectives::MailboxCall::prepare(checked, state.ialltoallMailbox->singleCopy().fromBytes(),
                                        state.ialltoallMailbox->lendBeyondBytes()));
  if (!call.staged()) prepared->key_ = alltoallvKey(args, p, typesFreed);
  return prepared;
}

uint64_t PreparedIalltoallv::ticket(int slot, int64_t callNumber) {
  return static_cast<uint64_t>(callNumber) << kSlotBits | static_cast<uint64_t>(slot);
}

Result<std::shared_ptr<collectives::Plan>> PreparedIalltoallv::plan(uint64_t ticket) {
  const int slot = static_cast<int>(ticket & ((1u << kSlotBits) - 1));
  const auto callNumber = static_cast<int64_t>(ticket >> kSlotBits);
  std::shared_ptr<collectives::Plan>& kept = fallbacks_[static_cast<size_t>(slot)];
  if (kept != nullptr && !kept->active()) return kept;
  collectives::Communicator& comm = *state_.comm;
  // Built inside a poll: whatever tag the program's own call pinned comes back after.
  const int32_t pinnedBefore = comm.pinnedPlanTag();
  comm.pinPlanTag(nonblockingTag(slot));
  auto plan = checkedAlltoallvPlan(state_, staged_, kNonblockingCheckTag, callNumber, state_.ialltoallvPairs);
  comm.pinPlanTag(pinnedBefore);
  IBDT_RETURN_IF_ERROR(plan.status());
  kept = std::make_shared<collectives::Plan>(std::move(*plan));
  return kept;
}

bool PreparedIalltoallv::repeatedBy(const AlltoallvArgs& args, int p, uint64_t typesFreed) const {
  return key_ && repeatsAlltoallv(*key_, args, p, typesFreed);
}

}  // namespace ibdt::mpi
