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
#pragma once

#include <atomic>
#include <map>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/shared_region.h"
#include "collectives/alltoall_args.h"
#include "ibdt/collectives.h"

namespace ibdt::collectives {

class MailboxCallRun;

class IalltoallMailbox {
 public:
  static constexpr int kPhases = 4;

  // Collective over `comm` (one node, more than one rank): rows of
  // `capacity` bytes of data (rounded down to a cache line; the ranks'
  // smallest). Every rank returns the same verdict.
  static Result<std::shared_ptr<IalltoallMailbox>> create(Communicator& comm, int64_t capacity,
                                                          Deadline deadline = Deadline::never());
  ~IalltoallMailbox();

  // A call fits when p x its block's packed bytes are at most this.
  int64_t capacity() const { return capacity_; }
  Communicator& comm() const { return comm_; }

  // The plan of this rank's next call, prepared with `checked`, ready to
  // start (once: the plan is the mailbox's, valid while it lives). A refused
  // `checked` still takes its number, and its run tells every peer (their
  // calls fail, naming this rank), and so do blocks that do not fit
  // (callers check capacity() first, alike on every rank). The mailbox's
  // own error once it broke.
  Result<Plan*> next(const Result<AlltoallArgs>& checked);

 private:
  friend class MailboxCallRun;
  IalltoallMailbox(Communicator& comm, SharedRegion segment, int64_t capacity);

  // The header and data of `rank`'s row of call `call`.
  std::byte* row(uint64_t call, int rank) const;
  // Rank `rank`'s done counter (its control line's first word).
  std::atomic<uint64_t>& done(int rank) const;
  // The run of `call` finished its reads: our done counter advances over
  // the calls finished in order.
  void finished(uint64_t call);
  // The run's holder saw it done: its plan may serve a later call.
  void released(MailboxCallRun* run) { idle_.push_back(run); }
  // One step of every call in flight on this rank; true when one moved.
  bool advanceAll();
  // Whether rank `rank` said its mailbox broke.
  bool brokenAt(int rank) const;
  // A peer failed or a call was abandoned: every call in flight and later
  // fails with `cause` (the first one kept), and the peers are told.
  void breakDown(Status cause);

  Communicator& comm_;
  SharedRegion segment_;
  const int64_t capacity_;
  uint64_t calls_ = 0;  // calls numbered so far
  uint64_t done_ = 0;   // calls finished in order (published in our done counter)
  std::vector<std::unique_ptr<Plan>> plans_;     // every run made so far
  std::vector<MailboxCallRun*> idle_;             // their runs free for a next call
  std::map<uint64_t, MailboxCallRun*> reading_;  // numbered calls whose reads are not finished
  Status broken_;  // a run lost a peer: later calls fail with it
  bool closing_ = false;
};

}  // namespace ibdt::collectives
