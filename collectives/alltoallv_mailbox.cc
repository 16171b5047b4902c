// The alltoallv mailbox (see the header).
//
// Layout: p flag lines, then two phases of p rows; a row is a header
// (kPairSlots int64 per peer, rounded to a line) and `capacity` bytes of
// data: the rank's outgoing blocks back to back in peer order, its own
// included (so that in place nothing is overwritten before it was packed,
// and out of place one code path). Rank r's flag line holds its call
// counter (shared_segment.h), then per phase its verdict and the
// generation of the arguments its header describes: one line tells a
// reader whether to copy at all and whether its cached check of the pair
// still holds, so a repeated call reads a flag line and a block per peer.
// Call k uses phase k mod 2; every rank waits for every flag before it
// reads anything of that call, so, as for the shared-memory alltoall, two
// phases suffice.
#include "collectives/alltoallv_mailbox.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "base/checked_math.h"
#include "collectives/alltoall_direct_write.h"
#include "collectives/alltoallv_pair_view.h"

namespace ibdt::collectives {
namespace {

constexpr std::string_view kWhat = "alltoallv (mailbox)";

enum Verdict : int64_t { kRefused = -1, kDoesNotFit = 0, kFits = 1 };
// The flag line's words after the counter: [kVerdictWord + phase], [kGenerationWord + phase].
constexpr int kVerdictWord = 1, kGenerationWord = 3;

// Distinct for every prepared call of the process.
std::atomic<int64_t> nextGeneration{1};

}  // namespace

MailboxCall MailboxCall::prepare(Result<AlltoallvArgs> checked, int64_t singleCopyFrom, int64_t lendBeyond) {
  MailboxCall call;
  call.generation_ = nextGeneration.fetch_add(1, std::memory_order_relaxed);
  if (!checked.isOk()) {
    call.refusal_ = std::move(checked).takeStatus();
    return call;
  }
  call.args_ = std::move(checked).value();
  const AlltoallvArgs& args = call.args_;
  const int p = static_cast<int>(args.sendcounts.size());
  call.views_.resize(static_cast<size_t>(p) * kPairSlots);
  call.sendDense_ = denseBlocks(args.sendtype);
  // Totals were checked against overflow (checkAlltoallvArgs).
  int64_t all = 0;
  for (int peer = 0; peer < p; ++peer) all += args.sendcounts[static_cast<size_t>(peer)] * args.sendtype.size();
  if (all <= lendBeyond) singleCopyFrom = 0;  // they fit: the row lets us finish alone
  for (int peer = 0; peer < p; ++peer) {
    int64_t* view = call.views_.data() + static_cast<size_t>(peer) * kPairSlots;
    fillPairView(args, peer, call.rowBytes_, view);
    if (call.sendDense_ && singleCopyFrom > 0 && view[kSendBytes] >= singleCopyFrom) {
      view[kSendAddress] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(args.sendBlock(peer)));
      call.lends_ = true;
      continue;
    }
    call.rowBytes_ += view[kSendBytes];
  }
  call.recvDense_ = denseBlocks(args.recvtype);
  auto segmentOf = [](const datatype::Datatype& type, const std::vector<int64_t>& counts,
                      std::optional<datatype::Segment>& out) -> Status {
    const int64_t most = std::max<int64_t>(1, *std::max_element(counts.begin(), counts.end()));
    IBDT_ASSIGN_OR_RETURN(datatype::Segment segment, datatype::Segment::create(type, most));
    out.emplace(std::move(segment));
    return Status::ok();
  };
  Status status;
  if (!call.sendDense_) status = segmentOf(args.sendtype, args.sendcounts, call.send_);
  if (status.isOk() && !call.recvDense_) status = segmentOf(args.recvtype, args.recvcounts, call.recv_);
  if (!status.isOk()) call.refusal_ = std::move(status);
  return call;
}

int64_t MailboxCall::headerBytes(int p) { return roundToSharedLine(int64_t{p} * kPairSlots * 8); }

Status MailboxCall::writeRow(std::byte* header, int64_t& headerGeneration, std::byte* data) const {
  if (refused()) return Status::ok();
  if (headerGeneration != generation_) {  // this header describes another call
    std::memcpy(header, views_.data(), views_.size() * sizeof(int64_t));
    headerGeneration = generation_;
  }
  if (data == nullptr) return Status::ok();
  const int p = static_cast<int>(args_.sendcounts.size());
  for (int peer = 0; peer < p; ++peer) {
    const int64_t* view = views_.data() + static_cast<size_t>(peer) * kPairSlots;
    if (view[kSendBytes] == 0 || view[kSendAddress] != 0) continue;
    std::byte* slot = data + view[kSendAt];
    if (sendDense_) {
      std::memcpy(slot, args_.sendBlock(peer), static_cast<size_t>(view[kSendBytes]));
    } else {
      IBDT_RETURN_IF_ERROR(send_->pack(args_.sendBlock(peer), 0, view[kSendBytes], slot));
    }
  }
  return Status::ok();
}

Status MailboxCall::readPair(int source, int rank, int64_t theirGeneration, const std::byte* theirHeader,
                             const std::byte* theirData, MailboxPairCache& pair, std::string_view what,
                             const SingleCopyReads* reads, std::vector<std::byte>* scratch) const {
  if (pair.theirs != theirGeneration || pair.ours != generation_) {
    const int64_t* theirView = reinterpret_cast<const int64_t*>(theirHeader) + static_cast<size_t>(rank) * kPairSlots;
    const int64_t* ourView = views_.data() + static_cast<size_t>(source) * kPairSlots;
    pair = {};
    IBDT_RETURN_IF_ERROR(pairMismatch(what, source, rank, theirView, ourView));
    IBDT_RETURN_IF_ERROR(pairMismatch(what, rank, source, ourView, theirView));
    pair = {theirGeneration, generation_, theirView[kSendAt], ourView[kRecvBytes],
            static_cast<uint64_t>(theirView[kSendAddress])};
  }
  if (pair.bytes == 0 || theirData == nullptr) return Status::ok();
  const std::byte* block = theirData + pair.at;
  if (pair.address != 0) {  // lent: straight out of the writer's buffer
    if (reads == nullptr || (!recvDense_ && scratch == nullptr)) {
      return makeError(Code::kInternal, what, ": rank ", source, " lent its buffer to a reader that cannot read it");
    }
    std::byte* into = args_.recvBlock(source);
    if (!recvDense_) {
      scratch->resize(static_cast<size_t>(pair.bytes));
      into = scratch->data();
    }
    IBDT_RETURN_IF_ERROR(reads->read(source, pair.address, pair.bytes, into).withContext(what));
    if (recvDense_) return Status::ok();
    block = into;
  }
  if (recvDense_) {
    std::memcpy(args_.recvBlock(source), block, static_cast<size_t>(pair.bytes));
    return Status::ok();
  }
  return recv_->unpack(args_.recvBlock(source), 0, pair.bytes, block).withContext(what);
}

Result<std::unique_ptr<AlltoallvMailbox>> AlltoallvMailbox::create(Communicator& comm, int64_t shareBytes,
                                                                  Deadline deadline) {
  const int p = comm.size();
  const int64_t header = MailboxCall::headerBytes(p);
  // Two rows' data within the share (the flag line and headers, O(p), are
  // bookkeeping, as the in-place algorithm's); the segment within the cap.
  int64_t capacity = std::max<int64_t>(0, shareBytes / 2);
  capacity = std::min(capacity, (kMaxSharedSegmentBytes / p - kSharedLine) / 2 - header);
  capacity = capacity / kSharedLine * kSharedLine;
  // The ranks may pass different budgets: the smallest row serves all.
  IBDT_ASSIGN_OR_RETURN(capacity, agreeOnOneNodeRows(comm, capacity, kWhat, deadline));
  if (capacity <= 0) return std::unique_ptr<AlltoallvMailbox>();
  const int64_t bytes = p * kSharedLine + 2 * p * (header + capacity);
  IBDT_ASSIGN_OR_RETURN(SharedRegion segment, mapSharedSegment(comm, bytes, kWhat, deadline));
  return std::unique_ptr<AlltoallvMailbox>(new AlltoallvMailbox(comm, std::move(segment), header, capacity));
}

std::byte* AlltoallvMailbox::row(uint64_t run, int rank) const {
  const int p = comm_.size();
  const auto phase = static_cast<int64_t>(run & 1);
  return reinterpret_cast<std::byte*>(segment_.data()) + p * kSharedLine +
         (phase * p + rank) * (header_ + capacity_);
}

Status AlltoallvMailbox::awaitAll(Deadline deadline) {
  for (int step = 1; step < comm_.size(); ++step) {
    const int source = (comm_.rank() + step) % comm_.size();
    Status peerFailed;
    IBDT_RETURN_IF_ERROR(awaitSharedFlag(comm_, segment_, source, run_, deadline, kWhat, peerFailed));
    IBDT_RETURN_IF_ERROR(peerFailed);
  }
  return Status::ok();
}

int64_t* AlltoallvMailbox::flagLine(int rank) const {
  return reinterpret_cast<int64_t*>(segment_.data() + int64_t{rank} * kSharedLine);
}

Result<bool> AlltoallvMailbox::run(MailboxCall& call, Deadline deadline, Status& outcome) {
  if (!broken_.isOk()) return broken_;
  const int p = comm_.size(), rank = comm_.rank();
  ++run_;
  const auto phase = static_cast<int>(run_ & 1);
  outcome = Status::ok();
  std::byte* mine = row(run_, rank);
  const bool fits = !call.refused() && call.rowBytes() <= capacity_;
  int64_t verdict = call.refused() ? kRefused : fits ? kFits : kDoesNotFit;
  if (Status written = call.writeRow(mine, written_[phase], fits ? mine + header_ : nullptr); !written.isOk()) {
    verdict = kRefused;  // the peers learn it below; we report why
    outcome = written.withContext(kWhat);
  }
  int64_t* line = flagLine(rank);
  line[kVerdictWord + phase] = verdict;
  line[kGenerationWord + phase] = call.generation();
  sharedFlag(segment_, rank).store(run_, std::memory_order_release);
  if (Status waited = awaitAll(deadline); !waited.isOk()) {
    broken_ = waited.withContext(strCat(kWhat, " rank ", rank, ", call ", run_));
    return broken_;
  }
  // Every rank reads the same verdicts: the same decision everywhere.
  int refusedBy = -1;
  bool everyoneFits = true;
  for (int r = 0; r < p; ++r) {
    const int64_t theirs = flagLine(r)[kVerdictWord + phase];
    if (theirs == kRefused && refusedBy < 0) refusedBy = r;
    everyoneFits = everyoneFits && theirs == kFits;
  }
  if (refusedBy >= 0) {
    if (call.refused()) {
      outcome = Status(call.refusal()).withContext(kWhat);
    } else if (outcome.isOk()) {
      outcome = makeError(Code::kInvalidArgument, kWhat, ": rank ", refusedBy, "'s arguments were refused");
    }
    return true;
  }
  if (!everyoneFits) return false;
  for (int step = 0; step < p; ++step) {
    const int source = (rank + step) % p;
    const std::byte* theirs = row(run_, source);
    Status read = call.readPair(source, rank, flagLine(source)[kGenerationWord + phase], theirs, theirs + header_,
                                pairs_[static_cast<size_t>(source)], kWhat);
    if (outcome.isOk()) outcome = std::move(read);
  }
  return true;
}

}  // namespace ibdt::collectives
