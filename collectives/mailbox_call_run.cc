// One non-blocking call through the call mailbox (see the header).
#include "collectives/mailbox_call_run.h"

#include <thread>

#include "base/backoff.h"
#include "collectives/shared_segment.h"

namespace ibdt::collectives {
namespace {

std::atomic<uint64_t>& callWord(std::byte* row) { return *reinterpret_cast<std::atomic<uint64_t>*>(row); }
const std::atomic<uint64_t>& callWord(const std::byte* row) {
  return *reinterpret_cast<const std::atomic<uint64_t>*>(row);
}

}  // namespace

MailboxCallRun::MailboxCallRun(IalltoallMailbox& box)
    : box_(box), comm_(box.comm()), p_(comm_.size()), rank_(comm_.rank()) {}

void MailboxCallRun::begin(uint64_t call) {
  call_ = call;
  written_ = readsDone_ = restDone_ = lent_ = failing_ = false;
  taken_ = 0;
  refusedBy_ = -1;
  emptyPolls_ = 0;
  outcome_ = Status::ok();
  refusal_ = Status::ok();
}

Status MailboxCallRun::start() {
  running_ = active_ = true;
  if (!box_.broken_.isOk()) {
    // The ranks no longer agree on the calls: nothing is written or read.
    outcome_ = box_.broken_;
    complete();
    return Status::ok();
  }
  tryWrite();
  // Our earlier calls move too: a program may start calls and then block
  // in some other MPI call, where nothing of ours runs.
  (void)box_.advanceAll();
  return Status::ok();
}

int MailboxCallRun::awaited() const {
  if (!written_) {
    if (call_ <= static_cast<uint64_t>(IalltoallMailbox::kPhases)) return -1;
    const uint64_t needed = call_ - IalltoallMailbox::kPhases;
    for (int r = 0; r < p_; ++r) {
      if (box_.done(r).load(std::memory_order_acquire) < needed) return r;
    }
    return -1;
  }
  if (readsDone_) return -1;
  const int source = (rank_ + 1 + taken_) % p_;
  return callWord(box_.row(call_, source)).load(std::memory_order_acquire) < call_ ? source : -1;
}

bool MailboxCallRun::tryWrite() {
  if (written_) return true;
  if (awaited() >= 0) return false;  // a rank still reads this phase's previous call
  std::byte* mine = box_.row(call_, rank_);
  if (refusal_.isOk()) refusal_ = writeRow(mine);
  rowHeader(mine)[kRowKindWord] = kind();
  rowHeader(mine)[kRowRefusedWord] = refusal_.isOk() ? 0 : 1;
  callWord(mine).store(call_, std::memory_order_release);
  written_ = true;
  if (!refusal_.isOk()) {  // the peers learn it from the header; we read nothing
    note(refusal_.withContext(strCat(algorithm(), " rank ", rank_, ", call ", call_)));
    complete();
    return true;
  }
  afterWrite();
  return true;
}

bool MailboxCallRun::readArrived() {
  bool moved = false;
  while (taken_ < p_ - 1) {
    const int source = (rank_ + 1 + taken_) % p_;
    const std::byte* theirs = box_.row(call_, source);
    if (callWord(theirs).load(std::memory_order_acquire) < call_) {
      checkPeer(source);
      break;
    }
    if (rowHeader(theirs)[kRowKindWord] != kind()) {
      // Another collective than ours: its header words mean other things.
      if (refusedBy_ < 0) refusedBy_ = source;
      note(makeError(Code::kInvalidArgument, algorithm(), " call ", call_, ": rank ", source,
                     " started another collective (an alltoall and an alltoallv do not match)"));
    } else if (rowHeader(theirs)[kRowRefusedWord] != 0) {
      if (refusedBy_ < 0) refusedBy_ = source;
      note(makeError(Code::kInvalidArgument, algorithm(), " call ", call_, ": rank ", source,
                     "'s arguments were refused (rank ", source, " says why)"));
    } else {
      take(source, theirs);
    }
    ++taken_;
    emptyPolls_ = 0;
    moved = true;
  }
  return moved;
}

void MailboxCallRun::checkPeer(int rank) {
  if (rank < 0 || ++emptyPolls_ % kSharedWaitsPerCheck != 0) return;
  Status peerFailed;
  Status checked = checkSharedPeer(comm_, rank, call_, peerFailed);
  if (checked.isOk()) checked = peerFailed;
  if (checked.isOk() && box_.brokenAt(rank)) {  // alive, but it writes and reads no more calls
    checked = makeError(Code::kPeerFailed, "rank ", rank, "'s mailbox broke (a peer of it failed)");
  }
  if (!checked.isOk()) box_.breakDown(checked.withContext(strCat(algorithm(), " rank ", rank_, ", call ", call_)));
}

void MailboxCallRun::fail(const Status& status) {
  if (!running_) return;
  note(status);
  if (holdsMessages()) return;  // they end the run, failed or not
  // A live peer may still be reading what we lent: the buffer stays ours
  // until it did, or broke down (it reads nothing more), or died.
  failing_ = lent_ && !box_.closing_;
  if (!failing_ || readersThrough()) complete();
}

bool MailboxCallRun::readersThrough() {
  for (int r = 0; r < p_; ++r) {
    if (r == rank_ || box_.done(r).load(std::memory_order_acquire) >= call_) continue;
    // A failed call: a peer that broke down reads nothing more, a dead one never will.
    if (failing_ && (box_.brokenAt(r) || !comm_.context().peerStatus(comm_.contextRank(r)).isOk())) continue;
    checkPeer(r);
    return false;
  }
  return true;
}

Result<PollResult> MailboxCallRun::poll() {
  // Every call in flight moves, whichever one the program tests or waits
  // for: a call's write may wait for our earlier calls' reads, and a
  // peer's for our later calls' writes.
  const bool moved = box_.advanceAll();
  PollResult result;
  result.progressed = moved;
  result.done = !running_;
  if (!running_ && active_) {
    active_ = false;
    returnToIdle();
  }
  return result;
}

bool MailboxCallRun::advance() {
  if (!running_) return false;
  if (failing_) {  // failed with a lent buffer: nothing more is written or read
    if (!readersThrough()) return false;
    complete();
    return true;
  }
  bool moved = false;
  if (!written_) {
    if (!tryWrite()) {
      checkPeer(awaited());
      return false;
    }
    if (!running_) return true;
    moved = true;
  }
  if (!readsDone_) {
    moved = readArrived() || moved;
    if (taken_ < p_ - 1) return moved;
    finishReads();
    restDone_ = afterReads(refusedBy_);
    moved = true;
  }
  if (!restDone_) {
    moved = advanceRest(restDone_) || moved;
    if (!running_) return true;  // the kind's step ended the run
  }
  if (!restDone_ || (lent_ && !readersThrough())) return moved;
  complete();
  return true;
}


Status MailboxCallRun::block(Deadline deadline) {
  Backoff backoff(comm_.context().waitSpins());
  if (running_ && (readsDone_ || failing_)) {  // the kind's messages or our readers: the next poll's
    if (deadline.expired()) return makeError(Code::kTimeout, algorithm(), " rank ", rank_, ": call ", call_);
    std::this_thread::yield();
    return Status::ok();
  }
  for (int rank = awaited(); rank >= 0 && running_; rank = awaited()) {
    // Our other calls move too: a peer may wait for one of their writes or
    // reads before it can write what this call waits for.
    if (box_.advanceAll()) return Status::ok();
    if (backoff.spinning()) {
      backoff.pause();
      continue;
    }
    checkPeer(rank);
    if (deadline.expired()) {
      return makeError(Code::kTimeout, algorithm(), " rank ", rank_, ": call ", call_, " waits for rank ", rank,
                       written_ ? " to write its blocks" : " to finish reading an earlier call");
    }
    backoff.pause();
  }
  return Status::ok();
}

void MailboxCallRun::abandon() {
  if (active_ && !box_.closing_) returnToIdle();
  active_ = false;
  if (!running_) return;
  abandonRest();
  // The peers may wait for our row or our done counter: every call fails.
  box_.breakDown(makeError(Code::kState, algorithm(), ": call ", call_, " was abandoned"));
  // Ends now even if it lent its buffer (breakDown left it failing): the
  // run is idle again, and a program that drops a collective in flight
  // (erroneous in MPI) must not reuse its buffers before the peers failed.
  note(box_.broken_);
  complete();
}

void MailboxCallRun::note(Status status) {
  if (outcome_.isOk() && !status.isOk()) outcome_ = std::move(status);
}

void MailboxCallRun::finishReads() {
  readsDone_ = true;
  if (!box_.closing_) box_.publishDone();
}

void MailboxCallRun::complete() {
  if (!running_) return;  // a breakdown inside the kind's step completed it first
  // finishReads counted this call already: storing the same counter again
  // would only pull its line away from the peers that poll it.
  const bool counted = readsDone_;
  running_ = false;
  readsDone_ = true;
  completed();
  box_.reading_.erase(call_);  // closing: no done counter moves, but no later breakdown may see this run
  if (!counted && !box_.closing_) box_.publishDone();
}

}  // namespace ibdt::collectives
