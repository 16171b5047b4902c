// The alltoallv of one node's ranks through a shared segment (see the
// header and docs/alltoall-shared-memory.md).
//
// Layout: p flag lines (shared_segment.h), then two phases of p rows; row r
// holds rank r's packed outgoing blocks in peer order (out of place without
// its block for itself, which goes straight from send to receive buffer),
// each phase's rows back to back, each row rounded to a line. Runs alternate
// the phases exactly as the alltoall's do (alltoall_shared_memory.cc): every
// rank waits for every flag in every run, blocks of 0 bytes included, which
// is what lets two phases suffice.
#include "collectives/alltoallv_shared_memory.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "base/checked_math.h"
#include "collectives/alltoall_direct_write.h"
#include "collectives/alltoallv_pair_view.h"
#include "collectives/shared_runs_plan.h"

namespace ibdt::collectives {
namespace {

constexpr std::string_view kWhat = "alltoallv (shared-memory)";

// Where the plan reads and writes, per peer.
struct SharedLayout {
  std::vector<int64_t> rowStart;  // rank r's row within a phase
  int64_t phaseBytes = 0;         // one phase: every row
  std::vector<int64_t> sendAt;    // our block for peer j within our row
  std::vector<int64_t> recvAt;    // our block within peer j's row
};

class SharedMemoryAlltoallv final : public SharedRunsPlan {
 public:
  SharedMemoryAlltoallv(Communicator& comm, AlltoallvArgs args, SharedLayout layout, datatype::Segment send,
                        datatype::Segment recv, std::optional<datatype::TypedCopy> own, SharedRegion segment,
                        int64_t rowBytes)
      : SharedRunsPlan(comm, std::move(segment), kWhat),
        args_(std::move(args)),
        layout_(std::move(layout)),
        send_(std::move(send)),
        recv_(std::move(recv)),
        own_(std::move(own)),
        rowBytes_(rowBytes),
        sendDense_(denseBlocks(args_.sendtype)),
        recvDense_(denseBlocks(args_.recvtype)) {}

  std::string_view algorithm() const override { return "shared-memory"; }
  Status rebind(const void* sendbuf, void* recvbuf) override {
    args_.sendbuf = static_cast<const std::byte*>(args_.inPlace ? recvbuf : sendbuf);
    args_.recvbuf = static_cast<std::byte*>(recvbuf);
    return Status::ok();
  }
  int64_t peakExtraBytes() const override { return sharedMemoryAlltoallvShare(rowBytes_); }

 private:
  std::byte* row(uint64_t run, int rank) const {
    const auto phase = static_cast<int64_t>(run & 1);
    return reinterpret_cast<std::byte*>(segment().data()) + p_ * kSharedLine + phase * layout_.phaseBytes +
           layout_.rowStart[static_cast<size_t>(rank)];
  }
  int64_t sendBytes(int peer) const { return args_.sendcounts[static_cast<size_t>(peer)] * args_.sendtype.size(); }
  int64_t recvBytes(int peer) const { return args_.recvcounts[static_cast<size_t>(peer)] * args_.recvtype.size(); }
  Status write() override;
  void ownBlock() override;
  // Copies our block out of `source`'s row into our receive block `source`.
  void take(int source) override;

  AlltoallvArgs args_;
  const SharedLayout layout_;
  datatype::Segment send_;  // the largest send block's count x sendtype: packs any block's prefix
  datatype::Segment recv_;  // the same for the receive blocks
  std::optional<datatype::TypedCopy> own_;  // out of place: our block for ourselves
  const int64_t rowBytes_;
  const bool sendDense_, recvDense_;  // a block is one dense run: memcpy
};

Status SharedMemoryAlltoallv::write() {
  std::byte* mine = row(run(), rank_);
  for (int peer = 0; peer < p_; ++peer) {
    const int64_t bytes = sendBytes(peer);
    if (bytes == 0 || (peer == rank_ && !args_.inPlace)) continue;
    std::byte* slot = mine + layout_.sendAt[static_cast<size_t>(peer)];
    if (sendDense_) {
      std::memcpy(slot, args_.sendBlock(peer), static_cast<size_t>(bytes));
    } else {
      IBDT_RETURN_IF_ERROR(send_.pack(args_.sendBlock(peer), 0, bytes, slot));
    }
  }
  return Status::ok();
}

// In place out of our own row (packed before anything was overwritten),
// else straight from send to receive buffer.
void SharedMemoryAlltoallv::ownBlock() {
  if (args_.inPlace) {
    take(rank_);
  } else if (own_.has_value() && own_->size() > 0) {
    Status copied = own_->run(args_.sendBlock(rank_), args_.recvBlock(rank_), 0, own_->size());
    if (!copied.isOk()) fail(std::move(copied.withContext("own block")));
  }
}

void SharedMemoryAlltoallv::take(int source) {
  const int64_t bytes = recvBytes(source);
  if (bytes == 0) return;
  const std::byte* block = row(run(), source) + layout_.recvAt[static_cast<size_t>(source)];
  if (recvDense_) {
    std::memcpy(args_.recvBlock(source), block, static_cast<size_t>(bytes));
    return;
  }
  Status status = recv_.unpack(args_.recvBlock(source), 0, bytes, block);
  if (!status.isOk()) fail(std::move(status));
}

// Exchanges every pair's view (alltoallv_pair_view.h; an alltoall of
// kPairSlots int64 per pair) and returns the first mismatching pair
// (sender * p + receiver) this rank is part of, or INT64_MAX; `recvAt` gets
// our block's place in each row.
Result<int64_t> checkPairs(Communicator& comm, const AlltoallvArgs& args, const std::vector<int64_t>& sendAt,
                           std::vector<int64_t>& recvAt, Status& mismatch) {
  const int p = comm.size(), rank = comm.rank();
  std::vector<int64_t> mine(static_cast<size_t>(p) * kPairSlots), theirs(mine.size());
  for (int peer = 0; peer < p; ++peer) {
    fillPairView(args, peer, sendAt[static_cast<size_t>(peer)], mine.data() + static_cast<size_t>(peer) * kPairSlots);
  }
  AlltoallOptions pairwise;
  pairwise.algorithm = AlltoallAlgorithm::kPairwise;
  const auto int64s = datatype::Datatype::of<int64_t>();
  IBDT_RETURN_IF_ERROR(alltoall(comm, mine.data(), kPairSlots, int64s, theirs.data(), kPairSlots, int64s, pairwise));
  int64_t first = std::numeric_limits<int64_t>::max();
  recvAt.assign(static_cast<size_t>(p), 0);
  for (int peer = 0; peer < p; ++peer) {
    const int64_t* ours = mine.data() + static_cast<size_t>(peer) * kPairSlots;
    const int64_t* view = theirs.data() + static_cast<size_t>(peer) * kPairSlots;
    recvAt[static_cast<size_t>(peer)] = view[kSendAt];
    auto note = [&](int from, int to, const int64_t* send, const int64_t* recv) {
      if (from * int64_t{p} + to >= first) return;
      Status differs = pairMismatch(kWhat, from, to, send, recv);
      if (differs.isOk()) return;
      first = from * int64_t{p} + to;
      mismatch = std::move(differs);
    };
    note(peer, rank, view, ours);
    note(rank, peer, ours, view);
  }
  return first;
}

enum VoteSlot : size_t { kOk, kHost, kRow, kFits, kVoteSlots };

}  // namespace

int64_t sharedMemoryAlltoallvShare(int64_t rowBytes) {
  Checked checked;
  const int64_t share = checked.add(kSharedLine, checked.mul(2, roundToSharedLine(rowBytes)));
  return checked.overflow ? std::numeric_limits<int64_t>::max() : share;
}

Result<std::unique_ptr<PlanImpl>> makeSharedMemoryAlltoallv(Communicator& comm, const Result<AlltoallvArgs>& checked,
                                                            std::optional<int64_t> inPlaceBudget) {
  const int p = comm.size(), rank = comm.rank();
  // This rank's row: its outgoing blocks (out of place without its own).
  std::vector<int64_t> sendAt(static_cast<size_t>(p), 0);
  int64_t rowBytes = 0;
  if (checked.isOk()) {
    for (int peer = 0; peer < p; ++peer) {
      sendAt[static_cast<size_t>(peer)] = rowBytes;
      // Totals were checked against overflow at init (checkAlltoallvArgs).
      if (peer != rank || checked->inPlace) rowBytes += checked->sendcounts[static_cast<size_t>(peer)] * checked->sendtype.size();
    }
  }
  const bool fits = !checked.isOk() || !checked->inPlace || !inPlaceBudget ||
                    2 * roundToSharedLine(rowBytes) <= *inPlaceBudget;  // the flag line: bookkeeping
  const int64_t vote[kVoteSlots] = {checked.isOk() ? 1 : 0, sharedHostKey(), roundToSharedLine(rowBytes), fits ? 1 : 0};
  std::vector<int64_t> votes(static_cast<size_t>(p) * kVoteSlots);
  IBDT_RETURN_IF_ERROR(allgather(comm, vote, kVoteSlots, votes.data()));
  auto of = [&](int r, VoteSlot slot) { return votes[static_cast<size_t>(r) * kVoteSlots + slot]; };
  SharedLayout layout;
  Checked total;
  bool oneHost = comm.nodeCount() == 1, everyoneFits = true;
  for (int r = 0; r < p; ++r) {
    if (of(r, kOk) == 0) {
      if (!checked.isOk()) return Status(checked.status()).withContext(kWhat);
      return makeError(Code::kInvalidArgument, kWhat, ": the arguments failed on rank ", r);
    }
    oneHost = oneHost && of(r, kHost) == of(0, kHost);
    everyoneFits = everyoneFits && of(r, kFits) != 0;
    layout.rowStart.push_back(layout.phaseBytes);
    layout.phaseBytes = total.add(layout.phaseBytes, of(r, kRow));
  }
  if (!oneHost) {
    return makeError(Code::kInvalidArgument, kWhat, ": its ranks span ",
                     comm.nodeCount() == 1 ? "several hosts" : strCat(comm.nodeCount(), " nodes"),
                     "; it needs one node's ranks");
  }
  if (!everyoneFits) return std::unique_ptr<PlanImpl>();  // declined: in place with limited memory instead
  const int64_t segmentBytes = total.add(total.mul(p, kSharedLine), total.mul(2, layout.phaseBytes));
  if (total.overflow || segmentBytes > kMaxSharedSegmentBytes) {
    return makeError(Code::kResource, kWhat, ": needs ", total.overflow ? "more than 2^63" : strCat(segmentBytes),
                     " bytes of shared memory for rows of ", layout.phaseBytes, " bytes in all (at most ",
                     kMaxSharedSegmentBytes, ")");
  }
  const AlltoallvArgs& args = *checked;
  Status mismatch;
  IBDT_ASSIGN_OR_RETURN(int64_t firstBad, checkPairs(comm, args, sendAt, layout.recvAt, mismatch));
  IBDT_RETURN_IF_ERROR(allreduce(comm, &firstBad, &firstBad, 1, ReduceOp::kMin));
  if (!mismatch.isOk()) return mismatch;
  if (firstBad != std::numeric_limits<int64_t>::max()) {
    return makeError(Code::kInvalidArgument, kWhat, ": rank ", firstBad / p, "'s block for rank ", firstBad % p,
                     " differs from what that rank receives");
  }
  layout.sendAt = std::move(sendAt);
  IBDT_ASSIGN_OR_RETURN(SharedRegion segment, mapSharedSegment(comm, segmentBytes, kWhat));
  const int64_t mostSent = std::max<int64_t>(1, *std::max_element(args.sendcounts.begin(), args.sendcounts.end()));
  const int64_t mostReceived = std::max<int64_t>(1, *std::max_element(args.recvcounts.begin(), args.recvcounts.end()));
  IBDT_ASSIGN_OR_RETURN(datatype::Segment send, datatype::Segment::create(args.sendtype, mostSent));
  IBDT_ASSIGN_OR_RETURN(datatype::Segment recv, datatype::Segment::create(args.recvtype, mostReceived));
  std::optional<datatype::TypedCopy> own;
  if (!args.inPlace) {
    const auto self = static_cast<size_t>(rank);
    IBDT_ASSIGN_OR_RETURN(datatype::TypedCopy copy, datatype::TypedCopy::create(args.sendtype, args.sendcounts[self],
                                                                                 args.recvtype, args.recvcounts[self]));
    own.emplace(std::move(copy));
  }
  return std::unique_ptr<PlanImpl>(std::make_unique<SharedMemoryAlltoallv>(
      comm, args, std::move(layout), std::move(send), std::move(recv), std::move(own), std::move(segment),
      roundToSharedLine(rowBytes)));
}

}  // namespace ibdt::collectives
