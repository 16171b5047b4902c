// collectives/mailbox_call_run.h — one non-blocking call in flight through
// the call mailbox (ialltoall_mailbox.h): what every call does whatever it
// exchanges. It waits until its phase is free, writes this rank's row,
// reads the peers' rows in the order rank + 1, rank + 2, ... as they
// arrive, tells the mailbox when its reads are over (the done counter) and
// watches the rank it waits for. What a row holds and how a block is read
// out of it is the kind's: an alltoall's blocks (AlltoallCallRun) or an
// alltoallv's (ialltoallv_mailbox_run.h).
//
// A row's header line: the call number (written last), two words of the
// kind's, the kind (an alltoall or an alltoallv: ranks that disagree on
// it fail that call alike), whether the writer's arguments were refused,
// then a third word of the kind's.
//
// A kind whose row lends the writer's own buffer to the readers (single
// copy, mailbox_single_copy.h) says so in writeRow (lendBuffer): the call
// then completes only once every rank's done counter passed it, i.e.
// every reader is through with that buffer.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "collectives/ialltoall_mailbox.h"
#include "collectives/plan_impl.h"

namespace ibdt::collectives {

// The header words of a row after the call number.
inline constexpr int kRowKindWords = 1;  // [1], [2]: the kind's
inline constexpr int kRowKindWord = 3;
inline constexpr int kRowRefusedWord = 4;
inline constexpr int kRowKindWord3 = 5;

inline int64_t* rowHeader(std::byte* row) { return reinterpret_cast<int64_t*>(row); }
inline const int64_t* rowHeader(const std::byte* row) { return reinterpret_cast<const int64_t*>(row); }

class MailboxCallRun : public PlanImpl {
 public:
  explicit MailboxCallRun(IalltoallMailbox& box);

  // The Plan that owns this run (the mailbox hands it out).
  void setPlan(Plan* plan) { plan_ = plan; }
  Plan* plan() const { return plan_; }
  uint64_t call() const { return call_; }
  // Whether this call read every row it will read: its phase may be reused.
  bool readsDone() const { return readsDone_; }
  // Whether the call has yet to decide how it runs (IalltoallMailbox::earlierUndecided).
  virtual bool undecided() const { return false; }

  Status start() override;
  Result<PollResult> poll() override;
  Status block(Deadline deadline) override;
  // One step of this call alone: writes once it may, reads what arrived,
  // then moves what the kind does after its reads; true when something moved.
  bool advance();
  // Ends the run with `status` (nothing more is written or read), unless
  // the kind still holds messages in flight (they end it) or a live peer
  // may still read the buffer it lent (then once none may).
  void fail(const Status& status);
  Status outcome() const override { return outcome_; }
  bool active() const override { return active_; }
  void abandon() override;

 protected:
  // A new call numbered `call`: everything of the last one forgotten.
  void begin(uint64_t call);
  // The kind's number in the row header.
  virtual int64_t kind() const = 0;
  // Writes the kind's header words and data into this rank's `row`; an
  // error refuses the call (the peers learn it from the header).
  virtual Status writeRow(std::byte* row) = 0;
  // Our row is out: what the kind does before reading (its own block).
  virtual void afterWrite() {}
  // `source` wrote this call's row and did not refuse it: read ours.
  virtual void take(int source, const std::byte* row) = 0;
  // Every row was read (`refusedBy`: a rank that refused, or -1): true when
  // the call is complete, false when the kind has more to do (advanceRest).
  virtual bool afterReads(int refusedBy) {
    (void)refusedBy;
    return true;
  }
  // Moves what afterReads left; `done` once it is over.
  virtual bool advanceRest(bool& done) {
    done = true;
    return false;
  }
  // Messages of the kind still in flight: a failure waits for them.
  virtual bool holdsMessages() const { return false; }
  // Cancels what the kind has in flight (the plan goes away).
  virtual void abandonRest() {}
  // The run is complete: drop what the call held.
  virtual void completed() {}
  // The mailbox may hand this run to a later call of its kind.
  virtual void returnToIdle() = 0;
  void note(Status status);
  // Called by writeRow: readers copy out of the caller's buffer, not our row.
  void lendBuffer() { lent_ = true; }

  IalltoallMailbox& box_;
  Communicator& comm_;
  const int p_, rank_;
  uint64_t call_ = 0;
  Status refusal_;  // set by the kind before start: the call is refused

 private:
  // The rank this run waits for: one whose done counter holds our write
  // back, or the next peer whose row is not written; -1: none.
  int awaited() const;
  // Writes our row once the phase is free; true once written.
  bool tryWrite();
  // Reads the rows that arrived; true when one was read.
  bool readArrived();
  // The awaited rank's liveness (every kSharedWaitsPerCheck empty polls).
  void checkPeer(int rank);
  void finishReads();
  // Whether every peer's done counter passed this call (it read what we
  // lent), or, once the call failed, the peer broke down or died; else
  // watches the first one that did not.
  bool readersThrough();
  void complete();

  Plan* plan_ = nullptr;
  Status outcome_;
  bool running_ = false, written_ = false, readsDone_ = false;
  bool restDone_ = false;  // the kind's work after the reads is over
  bool lent_ = false;      // our row lent our buffer (lendBuffer)
  bool failing_ = false;   // failed, waiting for readersThrough() before completing
  // Active for the Plan until its own test or wait saw it done: a run
  // finished by another call's poll keeps its slot until then, so a holder
  // of the Plan never sees a later call in it.
  bool active_ = false;
  int taken_ = 0;       // peers read, in the order rank + 1, rank + 2, ...
  int refusedBy_ = -1;  // a peer that refused this call
  uint32_t emptyPolls_ = 0;
};

}  // namespace ibdt::collectives
