// mpi/ialltoallv_prepared.h — an MPI_Ialltoallv call prepared for the
// communicator's call mailbox (collectives/ialltoall_mailbox.h), and the
// plan it runs by messages when some rank's blocks do not fit a row.
//
// Kept in the communicator's state while the calls repeat their arguments
// (the conversion, the check and the pair views are then not redone, and
// the fallback plan of each reserved tag is built once, as the message
// path's TaggedPlans are: for the previous call's arguments only); a call
// with a staged side is prepared afresh, its staging buffers living with
// that call only.
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>

#include "collectives/alltoallv_mailbox.h"
#include "collectives/ialltoall_mailbox.h"
#include "mpi/alltoallv_call.h"
#include "mpi/nonblocking.h"
#include "mpi/staging.h"

namespace ibdt::mpi {

struct CommState;

class PreparedIalltoallv final : public collectives::AlltoallvFallback {
 public:
  // Prepares `args` (not in place) on `state`'s mailbox: packs a staged
  // side first; a failed pack or check is prepared as a refused call, so
  // the peers learn it. An error only for a type without a signature in
  // ibdt (alike on every rank of a correct program: the call goes to MPI).
  static Result<std::shared_ptr<PreparedIalltoallv>> prepare(CommState& state, const AlltoallvArgs& args,
                                                             MPI_Comm comm);

  // The ticket of the call numbered `callNumber` (the communicator's
  // non-blocking alltoallv calls) on reserved tag slot `slot`.
  static uint64_t ticket(int slot, int64_t callNumber);
  // The checked pairwise plan of that call on its slot's tag (the one built
  // for the slot before, once it is idle).
  Result<std::shared_ptr<collectives::Plan>> plan(uint64_t ticket) override;

  const std::shared_ptr<const collectives::MailboxCall>& call() const { return call_; }
  // The staging to unpack when a run completes, if the call has one.
  StagedAlltoallv* staging() { return staged_.staged() && !call_->refused() ? &staged_ : nullptr; }
  // Whether a later call with `args` may run this one again.
  bool repeatedBy(const AlltoallvArgs& args, int p, uint64_t typesFreed) const;

 private:
  PreparedIalltoallv(CommState& state, StagedAlltoallv staged) : state_(state), staged_(std::move(staged)) {}

  CommState& state_;
  std::shared_ptr<collectives::IalltoallMailbox> box_;  // held while a run of the call is in flight
  StagedAlltoallv staged_;
  std::shared_ptr<const collectives::MailboxCall> call_;
  std::optional<AlltoallvCache::Key> key_;  // none when staged
  std::array<std::shared_ptr<collectives::Plan>, kNonblockingTags> fallbacks_{};
};

}  // namespace ibdt::mpi
