// An alltoallv call through the call mailbox (see the header).
#include "collectives/ialltoallv_mailbox_run.h"

#include <utility>

namespace ibdt::collectives {
namespace {

// An alltoallv row's header words (mailbox_call_run.h).
constexpr int kGenerationWord = kRowKindWords, kFitsWord = kRowKindWords + 1;

}  // namespace

void AlltoallvCallRun::prepare(uint64_t call, std::shared_ptr<const MailboxCall> prepared,
                               std::shared_ptr<AlltoallvFallback> fallback, uint64_t ticket) {
  begin(call);
  prepared_ = std::move(prepared);
  fallback_ = std::move(fallback);
  ticket_ = ticket;
  byMessages_.reset();
  decided_ = false;
  idlePolls_ = 0;
  refusal_ = prepared_->refusal();
  fits_ = box_.viewsBytes_ + prepared_->rowBytes() <= box_.capacity() + box_.viewsRoom_;
  // Our blocks travel as messages: so do everyone's.
  everyoneFits_ = fits_;
}

Status AlltoallvCallRun::writeRow(std::byte* row) {
  int64_t& viewsWritten = box_.viewsWritten_[call_ % IalltoallMailbox::kPhases];
  std::byte* views = box_.rowData(row);
  IBDT_RETURN_IF_ERROR(prepared_->writeRow(views, viewsWritten, fits_ ? views + box_.viewsBytes_ : nullptr));
  if (prepared_->lendsBuffer()) lendBuffer();
  rowHeader(row)[kGenerationWord] = prepared_->generation();
  rowHeader(row)[kFitsWord] = fits_ ? 1 : 0;
  return Status::ok();
}

void AlltoallvCallRun::afterWrite() {
  if (!fits_) return;
  std::byte* mine = box_.row(call_, rank_);
  const std::byte* views = box_.rowData(mine);
  note(prepared_->readPair(rank_, rank_, prepared_->generation(), views, views + box_.viewsBytes_,
                           box_.pairs_[static_cast<size_t>(rank_)], algorithm(), &box_.singleCopy_, &scratch_));
}

void AlltoallvCallRun::take(int source, const std::byte* theirs) {
  const int64_t* words = rowHeader(theirs);
  if (words[kFitsWord] == 0) everyoneFits_ = false;
  // Checked whether or not it arrived here: a pair that disagrees fails
  // alike on its two ranks when the fallback carries every block too.
  const std::byte* views = box_.rowData(theirs);
  note(prepared_->readPair(source, rank_, words[kGenerationWord], views,
                           everyoneFits_ ? views + box_.viewsBytes_ : nullptr, box_.pairs_[static_cast<size_t>(source)],
                           algorithm(), &box_.singleCopy_, &scratch_));
}

bool AlltoallvCallRun::afterReads(int refusedBy) {
  // Every rank read the same headers: a refusal fails the call everywhere,
  // else blocks that did not fit send everyone to the fallback (advanceRest).
  decided_ = refusedBy >= 0 || everyoneFits_;
  return decided_;
}

bool AlltoallvCallRun::startFallback() {
  decided_ = true;
  auto plan = fallback_->plan(ticket_);
  Status started = plan.isOk() ? (*plan)->start() : plan.status();
  if (started.isOk()) {
    byMessages_ = std::move(*plan);
    return true;
  }
  // The peers run theirs and would wait for ours: they learn it from our control line.
  note(started.withContext(strCat(algorithm(), " call ", call_, ": the call by messages")));
  box_.breakDown(makeError(Code::kResource, algorithm(), " rank ", rank_, ": call ", call_,
                           "'s plan by messages could not start"));
  return false;
}

Status AlltoallvCallRun::peerBroke() const {
  for (int rank = 0; rank < p_; ++rank) {
    if (rank != rank_ && box_.brokenAt(rank)) {
      return makeError(Code::kPeerFailed, algorithm(), " call ", call_, ": rank ", rank,
                       "'s mailbox broke; it does not run its part of the call by messages");
    }
  }
  return Status::ok();
}

bool AlltoallvCallRun::advanceRest(bool& done) {
  done = false;
  if (byMessages_ == nullptr) {
    if (box_.earlierUndecided(call_)) return false;  // fallbacks start in call order
    if (!startFallback()) {
      done = true;
      return true;
    }
  }
  bool moved = false;
  auto polled = byMessages_->test(&moved);
  done = !polled.isOk() || *polled;
  if (done) {
    note(polled.isOk() ? byMessages_->wait() : polled.status());
  } else if (!moved && ++idlePolls_ % kSharedWaitsPerCheck == 0) {
    if (Status broke = peerBroke(); !broke.isOk()) {
      note(broke);
      byMessages_.reset();  // cancels its unmatched receives
      done = true;
    }
  }
  return moved || done;
}

bool AlltoallvCallRun::holdsMessages() const { return byMessages_ != nullptr && byMessages_->active(); }

void AlltoallvCallRun::completed() {
  // What the call held goes with it: a staged call's buffers among them.
  byMessages_.reset();
  prepared_.reset();
  fallback_.reset();
}

}  // namespace ibdt::collectives
