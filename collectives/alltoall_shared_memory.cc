// The all-to-all of one node's ranks through a shared segment (see the
// header and docs/alltoall-shared-memory.md).
//
// Layout: p flag lines (rank r's run counter in line r), then two phases of
// p rows; row r of a phase holds rank r's packed send blocks in order (its
// block for itself goes straight from its send to its receive buffer: the
// slot stays unused).
// Run k (k = 1, 2, ...) uses phase k mod 2: rank r packs into its row, then
// stores k in its flag (release); a rank copies block r of row i once flag i
// reads k or more (acquire; a faster rank may already be in run k + 1,
// which writes the other phase). Rank i cannot write phase k mod 2 again
// (run k + 2) before every rank raised its flag for run k + 1, which each
// does only after its run k copied everything out: two phases suffice.
#include "collectives/alltoall_shared_memory.h"

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <string>

#include "base/backoff.h"
#include "base/checked_math.h"
#include "base/shared_region.h"
#include "collectives/alltoall_direct_write.h"

namespace ibdt::collectives {
namespace {

constexpr int64_t kLine = 64;
// More than this is not a small-block algorithm any more (and would be
// pinned in every rank's page tables): refused with the size it needed.
constexpr int64_t kMaxSegmentBytes = int64_t{1} << 30;

int64_t rowBytes(int p, int64_t bytes) { return (p * bytes + kLine - 1) / kLine * kLine; }

// The same on every process of one boot of one host: ranks that differ
// here cannot share memory, whatever their node map says.
int64_t hostKey() {
  std::ifstream file("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(file, id);
  char host[256] = {};
  (void)gethostname(host, sizeof host - 1);
  return static_cast<int64_t>(std::hash<std::string>{}(id + "/" + host) >> 2);
}

class SharedMemoryAlltoall final : public PlanImpl {
 public:
  SharedMemoryAlltoall(Communicator& comm, const AlltoallArgs& args, datatype::Segment send,
                       datatype::Segment recv, std::optional<datatype::TypedCopy> own, SharedRegion segment)
      : comm_(comm),
        ctx_(comm.context()),
        args_(args),
        send_(std::move(send)),
        recv_(std::move(recv)),
        own_(std::move(own)),
        segment_(std::move(segment)),
        p_(comm.size()),
        rank_(comm.rank()),
        row_(rowBytes(p_, args.bytes)),
        sendDense_(denseBlocks(args.inPlace ? args.recvtype : args.sendtype)),
        recvDense_(denseBlocks(args.recvtype)) {}

  Status start() override;
  Result<PollResult> poll() override;
  Status block(Deadline deadline) override;
  Status outcome() const override { return outcome_; }
  bool active() const override { return active_; }
  void abandon() override { active_ = false; }
  std::string_view algorithm() const override { return "shared-memory"; }
  Status rebind(const void* sendbuf, void* recvbuf) override {
    args_.sendbuf = static_cast<const std::byte*>(args_.inPlace ? recvbuf : sendbuf);
    args_.recvbuf = static_cast<std::byte*>(recvbuf);
    return Status::ok();
  }
  // This rank's share of the segment: its flag line and its two rows.
  int64_t peakExtraBytes() const override { return kLine + 2 * row_; }

 private:
  std::atomic<uint64_t>& flag(int rank) const {
    return *reinterpret_cast<std::atomic<uint64_t>*>(segment_.data() + rank * kLine);
  }
  std::byte* row(uint64_t run, int rank) const {
    const int64_t phase = static_cast<int64_t>(run & 1);
    return reinterpret_cast<std::byte*>(segment_.data()) + p_ * kLine + (phase * p_ + rank) * row_;
  }
  bool arrived(int rank) const { return flag(rank).load(std::memory_order_acquire) >= run_; }
  // Copies block `rank_` of `source`'s row into our receive block `source`.
  void take(int source);
  void fail(Status status);

  Communicator& comm_;
  messaging::Context& ctx_;
  AlltoallArgs args_;
  datatype::Segment send_;  // p * sendcount x sendtype (in place: the receive side)
  datatype::Segment recv_;  // p * recvcount x recvtype
  // Our own block, send to receive buffer directly (not through the row:
  // two copies less); none in place, where it already lies where it belongs.
  std::optional<datatype::TypedCopy> own_;
  SharedRegion segment_;
  const int p_, rank_;
  const int64_t row_;
  const bool sendDense_, recvDense_;  // blocks back to back, each one dense run: copied with memcpy
  uint64_t run_ = 0;  // the current or last run's number (the flags' value)
  int taken_ = 0;     // peers' blocks of this run copied out; the next source is (rank_ + 1 + taken_) mod p
  bool active_ = false;
  Status outcome_;
  Status broken_;  // a run failed: the ranks no longer agree on the run number
};

Status SharedMemoryAlltoall::start() {
  if (!broken_.isOk()) return broken_;
  ++run_;
  taken_ = 0;
  outcome_ = Status::ok();
  std::byte* mine = row(run_, rank_);
  const std::byte* from = args_.inPlace ? args_.recvbuf : args_.sendbuf;
  // The blocks for the peers: before ours and after it.
  const int64_t b = args_.bytes, ownAt = rank_ * b, total = p_ * b;
  for (auto [first, last] : {std::pair{int64_t{0}, ownAt}, std::pair{ownAt + b, total}}) {
    if (first == last) continue;
    if (sendDense_) {
      std::memcpy(mine + first, from + first, static_cast<size_t>(last - first));
    } else {
      IBDT_RETURN_IF_ERROR(send_.pack(from, first, last, mine + first));
    }
  }
  flag(rank_).store(run_, std::memory_order_release);
  if (own_.has_value() && own_->size() > 0) {
    Status copied = own_->run(args_.sendBlock(rank_), args_.recvBlock(rank_), 0, own_->size());
    if (!copied.isOk()) fail(std::move(copied.withContext("own block")));
  }
  active_ = true;
  return Status::ok();
}

void SharedMemoryAlltoall::take(int source) {
  const std::byte* block = row(run_, source) + rank_ * args_.bytes;
  if (args_.bytes == 0) return;
  if (recvDense_) {
    std::memcpy(args_.recvBlock(source), block, static_cast<size_t>(args_.bytes));
    return;
  }
  Status status = recv_.unpack(args_.recvbuf, source * args_.bytes, (source + 1) * args_.bytes, block);
  if (!status.isOk()) fail(std::move(status));
}

void SharedMemoryAlltoall::fail(Status status) {
  if (!outcome_.isOk()) return;
  outcome_ = status.withContext(strCat("alltoall (shared-memory) rank ", rank_, ", run ", run_));
  broken_ = outcome_;
}

Result<PollResult> SharedMemoryAlltoall::poll() {
  PollResult result;
  if (!active_) return result;
  while (taken_ < p_ - 1 && outcome_.isOk()) {
    const int source = (rank_ + 1 + taken_) % p_;
    if (!arrived(source)) break;
    take(source);
    ++taken_;
    result.progressed = true;
  }
  if (taken_ == p_ - 1 || !outcome_.isOk()) {
    active_ = false;
    result.done = true;
  }
  return result;
}

// Waits for the next source's flag. The messaging layer is progressed
// meanwhile: other traffic moves, and a dead rank is noticed (its link
// fails) instead of waited for until the deadline.
Status SharedMemoryAlltoall::block(Deadline deadline) {
  if (!active_ || taken_ == p_ - 1) return Status::ok();
  const int source = (rank_ + 1 + taken_) % p_;
  Backoff backoff(ctx_.waitSpins());
  while (!arrived(source)) {
    IBDT_RETURN_IF_ERROR(ctx_.progress());
    if (Status peer = ctx_.peerStatus(comm_.contextRank(source)); !peer.isOk()) {
      fail(peer.withContext(strCat("rank ", source, " failed before it packed run ", run_)));
      return Status::ok();
    }
    if (deadline.expired()) {
      return makeError(Code::kTimeout, "alltoall (shared-memory) rank ", rank_, ": run ", run_,
                       " did not complete in time (receive from rank ", source, ": its blocks are not packed)");
    }
    backoff.pause();
  }
  return Status::ok();
}

}  // namespace

int64_t sharedMemoryAlltoallBytes(int p, int64_t bytes) {
  Checked checked;
  const int64_t row = checked.add(checked.mul(p, bytes), kLine - 1) / kLine * kLine;
  const int64_t total = checked.add(checked.mul(p, kLine), checked.mul(checked.mul(2, p), row));
  return checked.overflow ? 0 : total;
}

Result<std::unique_ptr<PlanImpl>> makeSharedMemoryAlltoall(Communicator& comm, const Result<AlltoallArgs>& checked) {
  const int p = comm.size();
  // Every rank votes, so that one rank's bad arguments fail them all.
  Status own = checked.status();
  datatype::Signature signature;
  if (own.isOk()) {
    const AlltoallArgs& args = *checked;
    auto sig = datatype::signature(args.inPlace ? args.recvtype : args.sendtype,
                                   args.inPlace ? args.recvcount : args.sendcount);
    if (sig.isOk()) signature = *sig;
    else own = sig.status();
  }
  const int64_t bytes = own.isOk() ? checked->bytes : -1;
  const int64_t segmentBytes = own.isOk() ? sharedMemoryAlltoallBytes(p, bytes) : 0;
  if (own.isOk() && (segmentBytes == 0 || segmentBytes > kMaxSegmentBytes)) {
    own = makeError(Code::kResource, "needs ", segmentBytes == 0 ? "more than 2^63" : strCat(segmentBytes),
                    " bytes of shared memory for ", p, " ranks of ", bytes, "-byte blocks (at most ",
                    kMaxSegmentBytes, ")");
  }
  const auto hash = static_cast<int64_t>(signature.hash);
  const int64_t host = hostKey();
  int64_t votes[] = {own.isOk() ? 1 : 0, bytes, -bytes, hash, -hash, host, -host};
  IBDT_RETURN_IF_ERROR(allreduce(comm, votes, votes, 7, ReduceOp::kMin));
  auto refuse = [&](auto&&... why) -> Status {
    if (!own.isOk()) return own.withContext("alltoall (shared-memory)");
    return makeError(Code::kInvalidArgument, "alltoall (shared-memory): ", why...);
  };
  if (votes[0] == 0) return refuse("the arguments failed on another rank");
  if (votes[1] != -votes[2] || votes[3] != -votes[4]) {
    return refuse("the ranks' blocks differ in bytes or signature (", votes[1], " to ", -votes[2],
                  " bytes per block)");
  }
  if (comm.nodeCount() != 1 || votes[5] != -votes[6]) {
    return refuse("its ranks span ", comm.nodeCount() == 1 ? "several hosts" : strCat(comm.nodeCount(), " nodes"),
                  "; it needs one node's ranks (use hierarchical across nodes)");
  }
  // Rank 0 creates the segment, the others map it.
  SharedRegion segment;
  int64_t where[] = {0, 0, 0, 0};  // created, pid, fd, inode
  Status mapped;
  if (comm.rank() == 0) {
    auto created = SharedRegion::create("alltoall-shared-memory", static_cast<size_t>(segmentBytes));
    if (created.isOk()) {
      segment = std::move(*created);
      where[0] = 1;
      where[1] = getpid();
      where[2] = segment.fd();
      where[3] = static_cast<int64_t>(segment.inode());
    } else {
      mapped = created.status();
    }
  }
  IBDT_RETURN_IF_ERROR(broadcast(comm, where, 4, 0));
  if (comm.rank() != 0 && where[0] == 1) {
    auto opened = SharedRegion::openPeer(static_cast<pid_t>(where[1]), static_cast<int>(where[2]),
                                         static_cast<uint64_t>(where[3]));
    if (opened.isOk()) segment = std::move(*opened);
    else mapped = opened.status();
  } else if (where[0] != 1 && mapped.isOk()) {
    mapped = makeError(Code::kSystem, "rank 0 could not create the segment");
  }
  int64_t everyoneMapped = mapped.isOk() ? 1 : 0;
  IBDT_RETURN_IF_ERROR(allreduce(comm, &everyoneMapped, &everyoneMapped, 1, ReduceOp::kMin));
  if (!mapped.isOk()) return mapped.withContext("alltoall (shared-memory): the segment");
  if (everyoneMapped == 0) {
    return makeError(Code::kSystem, "alltoall (shared-memory): another rank could not map the segment");
  }
  const AlltoallArgs& args = *checked;
  IBDT_ASSIGN_OR_RETURN(datatype::Segment send, datatype::Segment::create(args.inPlace ? args.recvtype : args.sendtype,
                                                                          p * (args.inPlace ? args.recvcount
                                                                                            : args.sendcount)));
  IBDT_ASSIGN_OR_RETURN(datatype::Segment recv, datatype::Segment::create(args.recvtype, p * args.recvcount));
  std::optional<datatype::TypedCopy> ownCopy;
  if (!args.inPlace) {
    IBDT_ASSIGN_OR_RETURN(datatype::TypedCopy copy, datatype::TypedCopy::create(args.sendtype, args.sendcount,
                                                                                 args.recvtype, args.recvcount));
    ownCopy.emplace(std::move(copy));
  }
  return std::unique_ptr<PlanImpl>(std::make_unique<SharedMemoryAlltoall>(
      comm, args, std::move(send), std::move(recv), std::move(ownCopy), std::move(segment)));
}

}  // namespace ibdt::collectives
