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

#include <atomic>
#include <cstring>
#include <optional>

#include "base/checked_math.h"
#include "collectives/alltoall_packing.h"
#include "collectives/shared_runs_plan.h"

namespace ibdt::collectives {
namespace {

constexpr int64_t kLine = kSharedLine;

int64_t rowBytes(int p, int64_t bytes) { return roundToSharedLine(p * bytes); }

class SharedMemoryAlltoall final : public SharedRunsPlan {
 public:
  SharedMemoryAlltoall(Communicator& comm, const AlltoallArgs& args, AlltoallPacking packing, SharedRegion segment)
      : SharedRunsPlan(comm, std::move(segment), "alltoall (shared-memory)"),
        args_(args),
        packing_(std::move(packing)),
        row_(rowBytes(p_, args.bytes)) {}

  std::string_view algorithm() const override { return "shared-memory"; }
  Status rebind(const void* sendbuf, void* recvbuf) override {
    args_.sendbuf = static_cast<const std::byte*>(args_.inPlace ? recvbuf : sendbuf);
    args_.recvbuf = static_cast<std::byte*>(recvbuf);
    return Status::ok();
  }
  Status rebindTypes(const void* sendbuf, int64_t sendcount, const datatype::Datatype& sendtype, void* recvbuf,
                     int64_t recvcount, const datatype::Datatype& recvtype) override;
  // This rank's share of the segment: its flag line and its two rows.
  int64_t peakExtraBytes() const override { return kLine + 2 * row_; }

 private:
  std::byte* row(uint64_t run, int rank) const {
    const int64_t phase = static_cast<int64_t>(run & 1);
    return reinterpret_cast<std::byte*>(segment().data()) + p_ * kLine + (phase * p_ + rank) * row_;
  }
  Status write() override;
  void ownBlock() override;
  void take(int source) override;

  AlltoallArgs args_;
  AlltoallPacking packing_;
  const int64_t row_;
};

Status SharedMemoryAlltoall::rebindTypes(const void* sendbuf, int64_t sendcount, const datatype::Datatype& sendtype,
                                         void* recvbuf, int64_t recvcount, const datatype::Datatype& recvtype) {
  IBDT_ASSIGN_OR_RETURN(AlltoallArgs args,
                        checkAlltoallArgs(comm_, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype));
  if (args.bytes != args_.bytes || args.inPlace != args_.inPlace) {
    return makeError(Code::kInvalidArgument, "alltoall (shared-memory) rebind: blocks of ", args.bytes, " bytes",
                     args.inPlace ? " in place" : "", " for a plan of ", args_.bytes, "-byte blocks",
                     args_.inPlace ? " in place" : "");
  }
  // The same layouts as now (a program moving its buffers, the MPI bridge's
  // byte sides): only the buffers move, no segment is compiled again.
  if (!sameAlltoallLayouts(args, args_)) {
    IBDT_ASSIGN_OR_RETURN(packing_, AlltoallPacking::of(args, p_));
  }
  args_ = std::move(args);
  return Status::ok();
}

Status SharedMemoryAlltoall::write() { return packing_.packRow(args_, p_, rank_, row(run(), rank_)); }

void SharedMemoryAlltoall::ownBlock() {
  Status copied = packing_.copyOwn(args_, rank_);
  if (!copied.isOk()) fail(std::move(copied.withContext("own block")));
}

void SharedMemoryAlltoall::take(int source) {
  Status status = packing_.unpackBlock(args_, source, row(run(), source) + rank_ * args_.bytes);
  if (!status.isOk()) fail(std::move(status));
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
  if (own.isOk() && (segmentBytes == 0 || segmentBytes > kMaxSharedSegmentBytes)) {
    own = makeError(Code::kResource, "needs ", segmentBytes == 0 ? "more than 2^63" : strCat(segmentBytes),
                    " bytes of shared memory for ", p, " ranks of ", bytes, "-byte blocks (at most ",
                    kMaxSharedSegmentBytes, ")");
  }
  const auto hash = static_cast<int64_t>(signature.hash);
  const int64_t host = sharedHostKey();
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
  IBDT_ASSIGN_OR_RETURN(SharedRegion segment, mapSharedSegment(comm, segmentBytes, "alltoall (shared-memory)"));
  IBDT_ASSIGN_OR_RETURN(AlltoallPacking packing, AlltoallPacking::of(*checked, p));
  return std::unique_ptr<PlanImpl>(
      std::make_unique<SharedMemoryAlltoall>(comm, *checked, std::move(packing), std::move(segment)));
}

}  // namespace ibdt::collectives
