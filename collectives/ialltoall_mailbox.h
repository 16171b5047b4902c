// collectives/ialltoall_mailbox.h — non-blocking alltoalls of one node's
// ranks through a segment made once per communicator, with no agreement
// per call: the MPI bridge's MPI_Ialltoall of small blocks
// (docs/alltoall-shared-memory.md, "Non-blocking calls: the call mailbox").
//
// Calls are numbered 1, 2, ... in the order each rank starts them, the
// same on every rank (MPI orders a communicator's collectives). Call k uses
// phase k mod kPhases. A rank packs its blocks into its row of that phase
// under a header (block bytes, signature hash, whether its arguments were
// refused) and then stores k in the header's first word (release). A reader
// copies its block out of row i once that word reads k, if the header
// agrees with its own call; a pair that disagrees fails on both of its
// ranks, naming the peer, and the other pairs still arrive.
//
// Rank r writes call k only once every rank's done counter (the calls it
// has read completely, counted in order) reached k - kPhases, so no row is
// overwritten while someone still reads it. Until then the write waits in
// the run's test or wait, never in the start: starting a call never blocks,
// as MPI_Ialltoall must not. Each call in flight has a Plan of its own
// (kept for later calls once its holder saw it done), as many as the
// program keeps in flight.
//
// MPI_Ialltoallv calls share the numbering and the rows: each rank writes
// its pair views (alltoallv_mailbox.h) and, when all its blocks fit its
// row, the blocks, and says in its header whether they fit. A reader copies
// its block from every row that holds one; if any rank's blocks did not
// fit, every rank sees it in the headers it reads and, once every row was
// read, runs the call by messages instead (the caller's fallback plan,
// built alike on every rank), so a call of any size completes.
//
// Single copy (mailbox_single_copy.h): dense blocks from the measured
// crossover up stay in the writer's send buffer; the row says where, each
// reader copies its block from there by cross-memory attach, and the
// writer's call completes once every done counter passed it. An
// alltoallv's lent blocks take no room in its row, so large dense calls
// fit.
#pragma once

#include <atomic>
#include <map>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/shared_region.h"
#include "collectives/alltoall_args.h"
#include "collectives/alltoallv_mailbox.h"
#include "collectives/mailbox_single_copy.h"
#include "collectives/shared_segment.h"
#include "ibdt/collectives.h"

namespace ibdt::collectives {

class MailboxCallRun;
class AlltoallCallRun;
class AlltoallvCallRun;

// How an alltoallv call whose blocks do not all fit runs: every rank builds
// the same plan for it (one that carries the call's blocks by messages on
// a tag of the call's own) and the run starts it.
class AlltoallvFallback {
 public:
  virtual ~AlltoallvFallback() = default;
  // The plan for the call the caller numbered `ticket`.
  virtual Result<std::shared_ptr<Plan>> plan(uint64_t ticket) = 0;
};

class IalltoallMailbox {
 public:
  static constexpr int kPhases = 4;

  // Collective over `comm` (one node, more than one rank): rows of
  // `capacity` bytes of data (rounded down to a cache line; the ranks'
  // smallest). Every rank returns the same verdict.
  //
  // `lendFittingCalls`: whether calls whose blocks fit the rows lend their
  // dense blocks too (single copy). A lent writer's wait needs its readers
  // to make progress, where a row lets it finish alone; a caller that
  // progresses only inside its own waits (the MPI bridge: a peer may block
  // in another MPI call) keeps the rows for calls that fit and lends only
  // where the alternative is messages, which need the peers' progress too.
  static Result<std::shared_ptr<IalltoallMailbox>> create(Communicator& comm, int64_t capacity,
                                                          Deadline deadline = Deadline::never(),
                                                          bool lendFittingCalls = false);
  ~IalltoallMailbox();

  // A call fits when p x its block's packed bytes are at most this; an
  // alltoallv call when its pair views and the blocks it does not lend
  // (single copy) are.
  int64_t capacity() const { return capacity_; }
  // Whether a row holds an alltoallv call's pair views at all (8 words per
  // rank): else nextV refuses, alike on every rank.
  bool takesAlltoallv() const { return viewsBytes_ <= capacity_ + viewsRoom_; }
  Communicator& comm() const { return comm_; }
  // Which blocks go by address (single copy), and how the peers' are read.
  const SingleCopyReads& singleCopy() const { return singleCopy_; }
  // An alltoallv call lends its dense blocks (MailboxCall::prepare) only
  // when the blocks it would put in its row exceed this many bytes (0:
  // always; see create's lendFittingCalls).
  int64_t lendBeyondBytes() const { return lendFittingCalls_ ? 0 : capacity_ + viewsRoom_ - viewsBytes_; }

  // The plan of this rank's next call, prepared with `checked`, ready to
  // start (once: the plan is the mailbox's, valid while it lives). A refused
  // `checked` still takes its number, and its run tells every peer (their
  // calls fail, naming this rank), and so do blocks that do not fit
  // (callers check capacity() first, alike on every rank). The mailbox's
  // own error once it broke.
  Result<Plan*> next(const Result<AlltoallArgs>& checked);
  // The same for an alltoallv call prepared as `call` (not in place; a
  // refused one takes its number too); `fallback` builds the plan of
  // `ticket` if some rank's blocks do not fit its row.
  Result<Plan*> nextV(std::shared_ptr<const MailboxCall> call, std::shared_ptr<AlltoallvFallback> fallback,
                      uint64_t ticket);

 private:
  friend class MailboxCallRun;
  friend class AlltoallCallRun;
  friend class AlltoallvCallRun;
  IalltoallMailbox(Communicator& comm, SharedRegion segment, SingleCopyReads singleCopy, int64_t capacity,
                   int64_t viewsRoom, bool lendFittingCalls);

  // The header line of `rank`'s row of call `call`; its data follows
  // (rowData): an alltoallv call's pair views first, then its blocks.
  std::byte* row(uint64_t call, int rank) const;
  static std::byte* rowData(std::byte* row) { return row + kSharedLine; }
  static const std::byte* rowData(const std::byte* row) { return row + kSharedLine; }
  // The next call's plan: a run from the kind's idle runs (or new),
  // numbered and prepared with `prepared`.
  template <class Run, class... Prepared>
  Plan* numbered(std::vector<Run*>& idle, Prepared&&... prepared);
  // Rank `rank`'s done counter (its control line's first word).
  std::atomic<uint64_t>& done(int rank) const;
  // A run finished its reads (or ended): our done counter advances over
  // the calls whose reads are over, in order.
  void publishDone();
  // One step of every call in flight on this rank; true when one moved.
  bool advanceAll();
  // Whether a call before `call` has not yet decided how it runs (an
  // alltoallv's fallback is built in call order on every rank).
  bool earlierUndecided(uint64_t call) const;
  // Whether rank `rank` said its mailbox broke.
  bool brokenAt(int rank) const;
  // A peer failed or a call was abandoned: every call in flight and later
  // fails with `cause` (the first one kept), and the peers are told.
  void breakDown(Status cause);

  Communicator& comm_;
  SharedRegion segment_;
  const SingleCopyReads singleCopy_;  // which blocks go by address, and the peers' processes
  const bool lendFittingCalls_;
  const int64_t capacity_;
  const int64_t viewsBytes_;  // an alltoallv call's pair views, at the start of its data
  // Bytes a row has beyond capacity_ for them: viewsBytes_ where the
  // segment's cap leaves room (alltoall rows never shrink for them).
  const int64_t viewsRoom_;
  uint64_t calls_ = 0;  // calls numbered so far
  uint64_t done_ = 0;   // calls whose reads are over, in order (published in our done counter)
  std::vector<std::unique_ptr<Plan>> plans_;     // every run made so far
  std::vector<AlltoallCallRun*> idle_;            // their runs free for a next call, by kind
  std::vector<AlltoallvCallRun*> idleV_;
  std::map<uint64_t, MailboxCallRun*> reading_;  // numbered calls not yet complete
  // Alltoallv: the call generation each phase's pair views of our row
  // describe (0: an alltoall call overwrote them), and the pairs as last
  // checked.
  int64_t viewsWritten_[kPhases] = {};
  std::vector<MailboxPairCache> pairs_;
  Status broken_;  // a run lost a peer: later calls fail with it
  bool closing_ = false;
};

}  // namespace ibdt::collectives
