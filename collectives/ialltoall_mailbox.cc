// The call mailbox of non-blocking alltoalls (see the header).
//
// Layout: p control lines (rank r's done counter in the first word of line
// r, whether its mailbox broke in the second), then kPhases phases of p rows. A row is a header line (the call
// number, written last, then block bytes, signature hash and whether the
// writer's arguments were refused) and `capacity` bytes of data: the
// writer's packed block for peer i at i x block bytes (its own slot unused).
#include "collectives/ialltoall_mailbox.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <utility>

#include "base/backoff.h"
#include "collectives/alltoall_packing.h"
#include "collectives/plan_impl.h"
#include "collectives/shared_segment.h"

namespace ibdt::collectives {
namespace {

constexpr std::string_view kWhat = "ialltoall (mailbox)";
// Header words after the call number.
constexpr int kBytesWord = 1, kSignatureWord = 2, kRefusedWord = 3;
// The control line's words: the done counter, then whether the rank's mailbox broke.
constexpr int kBrokenWord = 1;

std::atomic<uint64_t>& callWord(std::byte* row) { return *reinterpret_cast<std::atomic<uint64_t>*>(row); }
int64_t* header(std::byte* row) { return reinterpret_cast<int64_t*>(row); }

}  // namespace

// One call in flight: a Plan of its own, reused by a later call once the
// plan's holder saw it done.
class MailboxCallRun final : public PlanImpl {
 public:
  explicit MailboxCallRun(IalltoallMailbox& box)
      : box_(box), comm_(box.comm()), p_(comm_.size()), rank_(comm_.rank()) {}

  void prepare(uint64_t call, const Result<AlltoallArgs>& checked);
  // The Plan that owns this run (the mailbox hands it out).
  void setPlan(Plan* plan) { plan_ = plan; }
  Plan* plan() const { return plan_; }
  uint64_t call() const { return call_; }
  // The call whose run finished last (0: none yet).
  uint64_t finishedCall() const { return finishedCall_; }

  Status start() override;
  Result<PollResult> poll() override;
  Status block(Deadline deadline) override;
  // One step of this call alone: writes once it may, copies what arrived;
  // true when something moved.
  bool advance();
  // Ends the run with `status` (nothing more is written or read).
  void fail(const Status& status);
  Status outcome() const override { return outcome_; }
  bool active() const override { return active_; }
  void abandon() override;
  std::string_view algorithm() const override { return "ialltoall-mailbox"; }

 private:
  // The rank this run waits for: one whose done counter holds our write
  // back, or the next peer whose row is not written; -1: none.
  int awaited() const;
  // Writes our row once the phase is free; true once written.
  bool tryWrite();
  // Checks `source`'s header against our call and copies our block out.
  void take(int source);
  // The awaited rank's liveness (every kSharedWaitsPerCheck empty polls).
  void checkPeer(int rank);
  void note(Status status);
  void complete();

  IalltoallMailbox& box_;
  Plan* plan_ = nullptr;
  Communicator& comm_;
  const int p_, rank_;
  uint64_t call_ = 0, finishedCall_ = 0;
  AlltoallArgs args_;
  std::optional<AlltoallPacking> packing_;
  uint64_t signatureHash_ = 0;
  Status refusal_;
  Status outcome_;
  bool running_ = false, written_ = false;
  // Active for the Plan until its own test or wait saw it done: a run
  // finished by another call's poll keeps its slot until then, so a holder
  // of the Plan never sees a later call in it.
  bool active_ = false;
  int taken_ = 0;  // peers read, in the order rank + 1, rank + 2, ...
  uint32_t emptyPolls_ = 0;
};

void MailboxCallRun::prepare(uint64_t call, const Result<AlltoallArgs>& checked) {
  call_ = call;
  written_ = false;
  taken_ = 0;
  emptyPolls_ = 0;
  outcome_ = Status::ok();
  refusal_ = checked.status();
  if (!refusal_.isOk()) return;
  const AlltoallArgs& args = *checked;
  // The same layouts as the last call of this plan: only the buffers move.
  if (!packing_ || !sameAlltoallLayouts(args, args_)) {
    packing_.reset();
    auto packing = AlltoallPacking::of(args, p_);
    auto signature = datatype::signature(args.inPlace ? args.recvtype : args.sendtype,
                                         args.inPlace ? args.recvcount : args.sendcount);
    refusal_ = !packing.isOk() ? packing.status() : signature.status();
    if (!refusal_.isOk()) return;
    packing_.emplace(std::move(*packing));
    signatureHash_ = signature->hash;
  }
  args_ = args;
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
  if (taken_ == p_ - 1) return -1;
  const int source = (rank_ + 1 + taken_) % p_;
  return callWord(box_.row(call_, source)).load(std::memory_order_acquire) < call_ ? source : -1;
}

bool MailboxCallRun::tryWrite() {
  if (written_) return true;
  if (awaited() >= 0) return false;  // a rank still reads this phase's previous call
  std::byte* mine = box_.row(call_, rank_);
  if (refusal_.isOk()) refusal_ = packing_->packRow(args_, p_, rank_, mine + kSharedLine);
  header(mine)[kBytesWord] = refusal_.isOk() ? args_.bytes : -1;
  header(mine)[kSignatureWord] = static_cast<int64_t>(signatureHash_);
  header(mine)[kRefusedWord] = refusal_.isOk() ? 0 : 1;
  callWord(mine).store(call_, std::memory_order_release);
  written_ = true;
  if (!refusal_.isOk()) {  // the peers learn it from the header; we read nothing
    note(refusal_.withContext(strCat(kWhat, " rank ", rank_, ", call ", call_)));
    complete();
    return true;
  }
  note(packing_->copyOwn(args_, rank_));
  return true;
}

void MailboxCallRun::take(int source) {
  std::byte* theirs = box_.row(call_, source);
  const int64_t* words = header(theirs);
  if (words[kRefusedWord] != 0) {
    note(makeError(Code::kInvalidArgument, kWhat, " call ", call_, ": rank ", source,
                   "'s arguments were refused (rank ", source, " says why)"));
    return;
  }
  if (words[kBytesWord] != args_.bytes || static_cast<uint64_t>(words[kSignatureWord]) != signatureHash_) {
    note(makeError(Code::kInvalidArgument, kWhat, " call ", call_, ": rank ", source, " sends rank ", rank_, " ",
                   words[kBytesWord], "-byte blocks, rank ", rank_, " expects ", args_.bytes, " bytes",
                   words[kBytesWord] == args_.bytes ? " of another signature" : ""));
    return;
  }
  note(packing_->unpackBlock(args_, source, theirs + kSharedLine + rank_ * args_.bytes));
}

void MailboxCallRun::checkPeer(int rank) {
  if (rank < 0 || ++emptyPolls_ % kSharedWaitsPerCheck != 0) return;
  Status peerFailed;
  Status checked = checkSharedPeer(comm_, rank, call_, peerFailed);
  if (checked.isOk()) checked = peerFailed;
  if (checked.isOk() && box_.brokenAt(rank)) {  // alive, but it writes and reads no more calls
    checked = makeError(Code::kPeerFailed, "rank ", rank, "'s mailbox broke (a peer of it failed)");
  }
  if (!checked.isOk()) box_.breakDown(checked.withContext(strCat(kWhat, " rank ", rank_, ", call ", call_)));
}

void MailboxCallRun::fail(const Status& status) {
  if (!running_) return;
  note(status);
  complete();
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
    box_.released(this);
  }
  return result;
}

bool MailboxCallRun::advance() {
  PollResult result;
  if (!running_) return false;
  if (!written_) {
    if (!tryWrite()) {
      checkPeer(awaited());
      return false;
    }
    result.progressed = true;
  }
  while (running_ && taken_ < p_ - 1) {
    const int source = (rank_ + 1 + taken_) % p_;
    if (callWord(box_.row(call_, source)).load(std::memory_order_acquire) < call_) {
      checkPeer(source);
      break;
    }
    take(source);
    ++taken_;
    emptyPolls_ = 0;
    result.progressed = true;
  }
  if (running_ && taken_ == p_ - 1) complete();
  return result.progressed;
}

Status MailboxCallRun::block(Deadline deadline) {
  Backoff backoff(comm_.context().waitSpins());
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
      return makeError(Code::kTimeout, kWhat, " rank ", rank_, ": call ", call_, " waits for rank ", rank,
                       written_ ? " to write its blocks" : " to finish reading an earlier call");
    }
    backoff.pause();
  }
  return Status::ok();
}

void MailboxCallRun::abandon() {
  if (active_ && !box_.closing_) box_.released(this);
  active_ = false;
  if (!running_) return;
  // The peers may wait for our row or our done counter: every call fails.
  box_.breakDown(makeError(Code::kState, kWhat, ": call ", call_, " was abandoned"));
  fail(box_.broken_);
}

void MailboxCallRun::note(Status status) {
  if (outcome_.isOk() && !status.isOk()) outcome_ = std::move(status);
}

void MailboxCallRun::complete() {
  running_ = false;
  finishedCall_ = call_;
  if (!box_.closing_) box_.finished(call_);
}

IalltoallMailbox::IalltoallMailbox(Communicator& comm, SharedRegion segment, int64_t capacity)
    : comm_(comm), segment_(std::move(segment)), capacity_(capacity) {}

IalltoallMailbox::~IalltoallMailbox() {
  // Runs still going are abandoned as their plans go: no done counter moves.
  closing_ = true;
  plans_.clear();
}

Result<std::shared_ptr<IalltoallMailbox>> IalltoallMailbox::create(Communicator& comm, int64_t capacity,
                                                                   Deadline deadline) {
  const int p = comm.size();
  const int64_t rowsPerPhase = int64_t{p};
  capacity = std::min(capacity, (kMaxSharedSegmentBytes / p - kSharedLine) / kPhases / rowsPerPhase - kSharedLine);
  capacity = std::max<int64_t>(0, capacity) / kSharedLine * kSharedLine;
  // The ranks may ask for different rows: the smallest serves all.
  IBDT_ASSIGN_OR_RETURN(capacity, agreeOnOneNodeRows(comm, capacity, kWhat, deadline));
  if (capacity <= 0) return makeError(Code::kInvalidArgument, kWhat, ": rows of ", capacity, " bytes");
  const int64_t bytes = p * kSharedLine + kPhases * p * (kSharedLine + capacity);
  IBDT_ASSIGN_OR_RETURN(SharedRegion segment, mapSharedSegment(comm, bytes, kWhat, deadline));
  return std::shared_ptr<IalltoallMailbox>(new IalltoallMailbox(comm, std::move(segment), capacity));
}

Result<Plan*> IalltoallMailbox::next(const Result<AlltoallArgs>& given) {
  if (!broken_.isOk()) return broken_;
  // Blocks that do not fit still take their number, refused: the peers
  // learn it from the header instead of meeting this rank a call behind.
  Result<AlltoallArgs> checked = given;
  if (checked.isOk() && checked->bytes * comm_.size() > capacity_) {
    checked = makeError(Code::kInvalidArgument, kWhat, ": ", comm_.size(), " blocks of ", checked->bytes,
                        " bytes do not fit a row of ", capacity_);
  }
  if (idle_.empty()) {
    auto run = std::make_unique<MailboxCallRun>(*this);
    MailboxCallRun* made = run.get();
    plans_.push_back(std::make_unique<Plan>(std::move(run)));
    made->setPlan(plans_.back().get());
    idle_.push_back(made);
  }
  MailboxCallRun* run = idle_.back();
  idle_.pop_back();
  const uint64_t call = ++calls_;
  run->prepare(call, checked);
  reading_.emplace(call, run);
  return run->plan();
}

std::byte* IalltoallMailbox::row(uint64_t call, int rank) const {
  const int p = comm_.size();
  const auto phase = static_cast<int64_t>(call % kPhases);
  return reinterpret_cast<std::byte*>(segment_.data()) + p * kSharedLine +
         (phase * p + rank) * (kSharedLine + capacity_);
}

std::atomic<uint64_t>& IalltoallMailbox::done(int rank) const { return sharedFlag(segment_, rank); }

bool IalltoallMailbox::advanceAll() {
  bool moved = false;
  // A run that finishes leaves reading_: walk by call number.
  for (auto it = reading_.begin(); it != reading_.end();) {
    const uint64_t call = it->first;
    moved = it->second->advance() || moved;
    it = reading_.upper_bound(call);
  }
  return moved;
}

bool IalltoallMailbox::brokenAt(int rank) const {
  return reinterpret_cast<const std::atomic<uint64_t>*>(segment_.data() + rank * kSharedLine)[kBrokenWord].load(
             std::memory_order_acquire) != 0;
}

void IalltoallMailbox::breakDown(Status cause) {
  if (broken_.isOk()) {
    broken_ = std::move(cause);
    // Peers that wait for our rows or reads learn it here, not by a timeout.
    reinterpret_cast<std::atomic<uint64_t>*>(segment_.data() + comm_.rank() * kSharedLine)[kBrokenWord].store(
        1, std::memory_order_release);
  }
  // Every call still reading fails: none will see all its rows.
  std::vector<MailboxCallRun*> runs;
  for (const auto& [call, run] : reading_) runs.push_back(run);
  for (MailboxCallRun* run : runs) run->fail(broken_);
}

void IalltoallMailbox::finished(uint64_t call) {
  // Calls finish in any order; the counter says how many did in order.
  reading_.erase(call);
  done_ = reading_.empty() ? calls_ : reading_.begin()->first - 1;
  done(comm_.rank()).store(done_, std::memory_order_release);
}

}  // namespace ibdt::collectives
