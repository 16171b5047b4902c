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
  refusal_ = prepared_->refusal();
  fits_ = prepared_->rowBytes() <= box_.capacity();
  // Our blocks travel as messages: so do everyone's.
  everyoneFits_ = fits_;
}

Status AlltoallvCallRun::writeRow(std::byte* row) {
  int64_t& viewsWritten = box_.viewsWritten_[call_ % IalltoallMailbox::kPhases];
  IBDT_RETURN_IF_ERROR(prepared_->writeRow(row + kSharedLine, viewsWritten, fits_ ? box_.rowData(row) : nullptr));
  rowHeader(row)[kGenerationWord] = prepared_->generation();
  rowHeader(row)[kFitsWord] = fits_ ? 1 : 0;
  return Status::ok();
}

void AlltoallvCallRun::afterWrite() {
  if (!fits_) return;
  std::byte* mine = box_.row(call_, rank_);
  note(prepared_->readPair(rank_, rank_, prepared_->generation(), mine + kSharedLine, box_.rowData(mine),
                           box_.pairs_[static_cast<size_t>(rank_)], algorithm()));
}

void AlltoallvCallRun::take(int source, const std::byte* theirs) {
  const int64_t* words = rowHeader(theirs);
  if (words[kFitsWord] == 0) everyoneFits_ = false;
  // Checked whether or not it arrived here: a pair that disagrees fails
  // alike on its two ranks when the fallback carries every block too.
  note(prepared_->readPair(source, rank_, words[kGenerationWord], theirs + kSharedLine,
                           everyoneFits_ ? box_.rowData(theirs) : nullptr, box_.pairs_[static_cast<size_t>(source)],
                           algorithm()));
}

bool AlltoallvCallRun::afterReads(int refusedBy) {
  // Every rank read the same headers: a refusal fails the call everywhere,
  // else blocks that did not fit send everyone to the fallback.
  if (refusedBy >= 0 || everyoneFits_) return true;
  auto plan = fallback_->plan(ticket_);
  Status started = plan.isOk() ? (*plan)->start() : plan.status();
  if (!started.isOk()) {
    note(started.withContext(strCat(algorithm(), " call ", call_, ": the call by messages")));
    return true;
  }
  byMessages_ = std::move(*plan);
  return false;
}

bool AlltoallvCallRun::advanceRest(bool& done) {
  bool moved = false;
  auto polled = byMessages_->test(&moved);
  done = !polled.isOk() || *polled;
  if (done) note(polled.isOk() ? byMessages_->wait() : polled.status());
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
