// collectives/ialltoallv_mailbox_run.h — an alltoallv call in flight
// through the call mailbox (ialltoall_mailbox.h): the MPI bridge's
// MPI_Ialltoallv on one node, with no agreement and no message per call.
//
// Its header words: the generation of the prepared call whose pair views
// follow the header line (rewritten only when the phase's row described
// another one), and whether the writer's blocks are in its row. Every
// block that arrived in a row is checked (both directions of the pair,
// once per pair of generations) and copied out as it arrives. If some
// rank's blocks did not fit its row, every rank knows it once it read every
// header, and then runs the caller's fallback plan: the call by messages.
// Fallbacks are built and started in call order on every rank (a call waits
// until every earlier call decided how it runs), so the plans' own
// per-call agreements (the checked pairwise plan's pair history) see the
// same order everywhere. A rank whose fallback cannot be built breaks the
// mailbox; its peers' fallbacks see that and fail instead of waiting.
#pragma once

#include <memory>
#include <vector>

#include "collectives/mailbox_call_run.h"

namespace ibdt::collectives {

class AlltoallvCallRun final : public MailboxCallRun {
 public:
  using MailboxCallRun::MailboxCallRun;
  // Call `call` of `prepared` (whose blocks fit this rank's row or not);
  // `fallback` builds the plan of `ticket` if some rank's do not.
  void prepare(uint64_t call, std::shared_ptr<const MailboxCall> prepared,
               std::shared_ptr<AlltoallvFallback> fallback, uint64_t ticket);
  std::string_view algorithm() const override { return "ialltoallv (mailbox)"; }
  bool undecided() const override { return !decided_; }

 private:
  int64_t kind() const override { return 2; }
  Status writeRow(std::byte* row) override;
  void afterWrite() override;
  void take(int source, const std::byte* row) override;
  bool afterReads(int refusedBy) override;
  bool advanceRest(bool& done) override;
  // Builds and starts the fallback; false when that failed (the mailbox broke).
  bool startFallback();
  // Whether a peer's mailbox broke: it will not run its part of the fallback.
  Status peerBroke() const;
  bool holdsMessages() const override;
  void abandonRest() override { byMessages_.reset(); }
  void completed() override;
  void returnToIdle() override { box_.idleV_.push_back(this); }

  std::shared_ptr<const MailboxCall> prepared_;
  std::shared_ptr<AlltoallvFallback> fallback_;
  uint64_t ticket_ = 0;
  bool fits_ = false;         // our blocks are in our row
  bool everyoneFits_ = true;  // as far as the rows read say
  bool decided_ = false;      // the reads are over and the fallback, if any, started
  uint32_t idlePolls_ = 0;    // of the fallback
  std::shared_ptr<Plan> byMessages_;  // the fallback, once started
  std::vector<std::byte> scratch_;    // a lent block on its way to a strided receive
};

}  // namespace ibdt::collectives
