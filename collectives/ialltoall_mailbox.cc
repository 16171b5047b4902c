// The call mailbox of non-blocking alltoalls (see the header).
//
// Layout: p control lines (rank r's done counter in the first word of line
// r, whether its mailbox broke in the second), then kPhases phases of p
// rows. A row is a header line (mailbox_call_run.h) and `capacity` bytes
// of data, plus room for an alltoallv's pair views where the segment's cap
// allows: an alltoall writer's packed block for peer i at i x block bytes
// (its own slot unused), an alltoallv writer's pair views
// (alltoallv_pair_view.h), then its blocks back to back.
#include "collectives/ialltoall_mailbox.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <utility>

#include "collectives/alltoall_packing.h"
#include "collectives/ialltoallv_mailbox_run.h"
#include "collectives/mailbox_call_run.h"
#include "collectives/plan_impl.h"
#include "collectives/shared_segment.h"

namespace ibdt::collectives {
namespace {

constexpr std::string_view kWhat = "ialltoall (mailbox)";
// An alltoall row's header words (mailbox_call_run.h): the block's packed
// bytes, its signature hash, and the address of the writer's send buffer
// when its blocks are read from there (single copy), else 0.
constexpr int kBytesWord = kRowKindWords, kSignatureWord = kRowKindWords + 1, kAddressWord = kRowKindWord3;
constexpr int64_t kAlltoallKind = 1;
// The control line's words: the done counter, then whether the rank's mailbox broke.
constexpr int kBrokenWord = 1;

}  // namespace

// An alltoall call in flight.
class AlltoallCallRun final : public MailboxCallRun {
 public:
  using MailboxCallRun::MailboxCallRun;
  void prepare(uint64_t call, const Result<AlltoallArgs>& checked);
  std::string_view algorithm() const override { return kWhat; }

 private:
  int64_t kind() const override { return kAlltoallKind; }
  Status writeRow(std::byte* row) override;
  void afterWrite() override { note(packing_->copyOwn(args_, rank_)); }
  void take(int source, const std::byte* row) override;
  void returnToIdle() override { box_.idle_.push_back(this); }

  AlltoallArgs args_;
  std::optional<AlltoallPacking> packing_;
  uint64_t signatureHash_ = 0;
  bool byAddress_ = false;          // our blocks are read from our send buffer
  std::vector<std::byte> scratch_;  // a block read by address for a strided receive
};

void AlltoallCallRun::prepare(uint64_t call, const Result<AlltoallArgs>& checked) {
  begin(call);
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
  // Alltoall calls always fit their rows: they lend only where the mailbox lends fitting calls.
  byAddress_ = box_.lendFittingCalls_ && !args.inPlace && packing_->sendDense && box_.singleCopy_.byAddress(args.bytes);
}

Status AlltoallCallRun::writeRow(std::byte* row) {
  box_.viewsWritten_[call_ % IalltoallMailbox::kPhases] = 0;  // our blocks go where an alltoallv's views were
  if (byAddress_) {
    lendBuffer();
  } else {
    IBDT_RETURN_IF_ERROR(packing_->packRow(args_, p_, rank_, box_.rowData(row)));
  }
  rowHeader(row)[kAddressWord] = byAddress_ ? static_cast<int64_t>(reinterpret_cast<uintptr_t>(args_.sendbuf)) : 0;
  rowHeader(row)[kBytesWord] = args_.bytes;
  rowHeader(row)[kSignatureWord] = static_cast<int64_t>(signatureHash_);
  return Status::ok();
}

void AlltoallCallRun::take(int source, const std::byte* theirs) {
  const int64_t* words = rowHeader(theirs);
  if (words[kBytesWord] != args_.bytes || static_cast<uint64_t>(words[kSignatureWord]) != signatureHash_) {
    note(makeError(Code::kInvalidArgument, kWhat, " call ", call_, ": rank ", source, " sends rank ", rank_, " ",
                   words[kBytesWord], "-byte blocks, rank ", rank_, " expects ", args_.bytes, " bytes",
                   words[kBytesWord] == args_.bytes ? " of another signature" : ""));
    return;
  }
  const uint64_t address = static_cast<uint64_t>(words[kAddressWord]);
  if (address == 0) {
    note(packing_->unpackBlock(args_, source, box_.rowData(theirs) + rank_ * args_.bytes));
    return;
  }
  // Dense blocks back to back in the writer's send buffer: ours is the rank_-th.
  const uint64_t block = address + static_cast<uint64_t>(rank_ * args_.bytes);
  if (packing_->recvDense) {
    note(box_.singleCopy_.read(source, block, args_.bytes, args_.recvBlock(source)).withContext(kWhat));
    return;
  }
  scratch_.resize(static_cast<size_t>(args_.bytes));
  Status read = box_.singleCopy_.read(source, block, args_.bytes, scratch_.data()).withContext(kWhat);
  note(read.isOk() ? packing_->unpackBlock(args_, source, scratch_.data()) : read);
}

IalltoallMailbox::IalltoallMailbox(Communicator& comm, SharedRegion segment, SingleCopyReads singleCopy,
                                   int64_t capacity, int64_t viewsRoom, bool lendFittingCalls)
    : comm_(comm),
      segment_(std::move(segment)),
      singleCopy_(std::move(singleCopy)),
      lendFittingCalls_(lendFittingCalls),
      capacity_(capacity),
      viewsBytes_(MailboxCall::headerBytes(comm.size())),
      viewsRoom_(viewsRoom),
      pairs_(static_cast<size_t>(comm.size())) {}

IalltoallMailbox::~IalltoallMailbox() {
  // Runs still going are abandoned as their plans go: no done counter moves.
  closing_ = true;
  plans_.clear();
}

Result<std::shared_ptr<IalltoallMailbox>> IalltoallMailbox::create(Communicator& comm, int64_t capacity,
                                                                   Deadline deadline, bool lendFittingCalls) {
  const int p = comm.size();
  const int64_t rowsPerPhase = int64_t{p};
  capacity = std::min(capacity, (kMaxSharedSegmentBytes / p - kSharedLine) / kPhases / rowsPerPhase - kSharedLine);
  capacity = std::max<int64_t>(0, capacity) / kSharedLine * kSharedLine;
  // The ranks may ask for different rows: the smallest serves all.
  IBDT_ASSIGN_OR_RETURN(capacity, agreeOnOneNodeRows(comm, capacity, kWhat, deadline));
  if (capacity <= 0) return makeError(Code::kInvalidArgument, kWhat, ": rows of ", capacity, " bytes");
  // Room for an alltoallv's pair views beside the capacity, where the cap
  // allows (the same on every rank: p and the agreed capacity decide).
  auto segmentBytes = [&](int64_t room) { return p * kSharedLine + kPhases * p * (kSharedLine + capacity + room); };
  const int64_t views = MailboxCall::headerBytes(p);
  const int64_t room = segmentBytes(views) <= kMaxSharedSegmentBytes ? views : 0;
  IBDT_ASSIGN_OR_RETURN(SharedRegion segment, mapSharedSegment(comm, segmentBytes(room), kWhat, deadline));
  IBDT_ASSIGN_OR_RETURN(SingleCopyReads singleCopy, SingleCopyReads::agree(comm, deadline));
  return std::shared_ptr<IalltoallMailbox>(
      new IalltoallMailbox(comm, std::move(segment), std::move(singleCopy), capacity, room, lendFittingCalls));
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
  return numbered(idle_, checked);
}

Result<Plan*> IalltoallMailbox::nextV(std::shared_ptr<const MailboxCall> prepared,
                                      std::shared_ptr<AlltoallvFallback> fallback, uint64_t ticket) {
  if (!broken_.isOk()) return broken_;
  if (!takesAlltoallv()) {
    return makeError(Code::kInvalidArgument, kWhat, ": rows of ", capacity_, " bytes cannot hold ", comm_.size(),
                     " ranks' pair views (", viewsBytes_, " bytes)");
  }
  return numbered(idleV_, std::move(prepared), std::move(fallback), ticket);
}

template <class Run, class... Prepared>
Plan* IalltoallMailbox::numbered(std::vector<Run*>& idle, Prepared&&... prepared) {
  if (idle.empty()) {
    auto run = std::make_unique<Run>(*this);
    Run* made = run.get();
    plans_.push_back(std::make_unique<Plan>(std::move(run)));
    made->setPlan(plans_.back().get());
    idle.push_back(made);
  }
  Run* run = idle.back();
  idle.pop_back();
  const uint64_t call = ++calls_;
  run->prepare(call, std::forward<Prepared>(prepared)...);
  reading_.emplace(call, run);
  return run->plan();
}

std::byte* IalltoallMailbox::row(uint64_t call, int rank) const {
  const int p = comm_.size();
  const auto phase = static_cast<int64_t>(call % kPhases);
  return reinterpret_cast<std::byte*>(segment_.data()) + p * kSharedLine +
         (phase * p + rank) * (kSharedLine + capacity_ + viewsRoom_);
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

bool IalltoallMailbox::earlierUndecided(uint64_t call) const {
  for (auto it = reading_.begin(); it != reading_.end() && it->first < call; ++it) {
    if (it->second->undecided()) return true;
  }
  return false;
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

void IalltoallMailbox::publishDone() {
  // Calls finish their reads in any order; the counter says how many did in order.
  done_ = calls_;
  for (const auto& [call, run] : reading_) {
    if (!run->readsDone()) {
      done_ = call - 1;
      break;
    }
  }
  done(comm_.rank()).store(done_, std::memory_order_release);
}

}  // namespace ibdt::collectives
