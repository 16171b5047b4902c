// kAuto for a persistent alltoallv: one agreement, the cost model's choice
// (alltoallv_select.h).
#include "collectives/alltoallv_select.h"

#include <algorithm>
#include <limits>

#include "base/log.h"
#include "collectives/alltoall_direct_write.h"
#include "collectives/alltoallv_algorithms.h"
#include "collectives/alltoallv_shared_memory.h"
#include "collectives/shared_segment.h"

namespace ibdt::collectives {
namespace {

// Slots of the allreduce (kMax): minima travel negated.
enum Slot : size_t { kRefused, kNegMinBlock, kMaxBlock, kMaxRank, kKind, kNegKind, kNotDense, kNegScratch, kSlots };

// This rank's contribution; kind -1: mixed kinds.
void contribute(const AlltoallvArgs& args, int rank, int64_t (&values)[kSlots]) {
  int64_t minBlock = std::numeric_limits<int64_t>::max(), maxBlock = 0, sent = 0, received = 0;
  for (size_t peer = 0; peer < args.sendcounts.size(); ++peer) {
    if (static_cast<int>(peer) == rank) continue;  // the own block is a local copy
    // Checked against 64-bit overflow with the side's total at init.
    const int64_t send = args.sendcounts[peer] * args.sendtype.size();
    const int64_t recv = args.recvcounts[peer] * args.recvtype.size();
    minBlock = std::min({minBlock, send, recv});
    maxBlock = std::max({maxBlock, send, recv});
    sent += send;
    received += recv;
  }
  const auto send = uniformKind(args.sendtype), recv = uniformKind(args.recvtype);
  const int64_t kind = send && recv && *send == *recv ? static_cast<int64_t>(*send) : -1;
  values[kRefused] = 0;
  values[kNegMinBlock] = minBlock == std::numeric_limits<int64_t>::max() ? 0 : -minBlock;
  values[kMaxBlock] = maxBlock;
  values[kMaxRank] = std::max(sent, received);
  values[kKind] = kind;
  values[kNegKind] = -kind;
  values[kNotDense] = denseBlocks(args.sendtype) && denseBlocks(args.recvtype) ? 0 : 1;
}

}  // namespace

std::string_view alltoallvAlgorithmName(AlltoallvAlgorithm algorithm) {
  switch (algorithm) {
    case AlltoallvAlgorithm::kAuto: return "auto";
    case AlltoallvAlgorithm::kPairwise: return "pairwise";
    case AlltoallvAlgorithm::kInPlaceLimited: return "in-place";
    case AlltoallvAlgorithm::kBruckZeroCopy: return "bruck-zero-copy";
    case AlltoallvAlgorithm::kDirectWrite: return "direct-write";
    case AlltoallvAlgorithm::kSharedMemory: return "shared-memory";
  }
  return "?";
}

Result<AlltoallvAgreement> agreeOnAlltoallv(Communicator& comm, const AlltoallvArgs* args, int64_t scratchBytes) {
  constexpr int64_t kNone = std::numeric_limits<int64_t>::min();  // max's identity
  int64_t values[kSlots] = {1, kNone, 0, 0, -1, -1, 1, kNone};  // refused
  if (args != nullptr) contribute(*args, comm.rank(), values);
  values[kNegScratch] = scratchBytes > 0 ? -scratchBytes : kNone;  // the smallest bound wins
  IBDT_RETURN_IF_ERROR(allreduce(comm, values, values, kSlots, ReduceOp::kMax));
  AlltoallvAgreement agreed;
  agreed.refused = values[kRefused] != 0;
  // Every rank refused: the slot still holds max's identity, which has no negation.
  agreed.minBlockBytes = values[kNegMinBlock] == std::numeric_limits<int64_t>::min() ? 0 : -values[kNegMinBlock];
  agreed.maxBlockBytes = values[kMaxBlock];
  agreed.maxRankBytes = values[kMaxRank];
  if (values[kKind] == -values[kNegKind] && values[kKind] > 0) {
    agreed.kind = static_cast<datatype::BasicKind>(values[kKind]);
  }
  agreed.dense = values[kNotDense] == 0;
  agreed.scratchBound = values[kNegScratch] == kNone ? 0 : -values[kNegScratch];
  return agreed;
}

AlltoallvChoice selectAlltoallv(const AlltoallCostModel& model, int p, const AlltoallvAgreement& agreed, int nodes) {
  const int64_t meanBlock = p > 1 ? (agreed.maxRankBytes + p - 2) / (p - 1) : 0;
  AlltoallvChoice best{AlltoallvAlgorithm::kPairwise,
                       model.predictNs(AlltoallAlgorithm::kPairwise, 2, p, meanBlock, nodes)};
  if (p <= 1 || agreed.maxBlockBytes == 0) return best;
  auto consider = [&](AlltoallvAlgorithm algorithm, AlltoallAlgorithm priced, int64_t blockBytes) {
    const double ns = model.predictNs(priced, 2, p, blockBytes, nodes);
    if (ns < best.predictedNs) best = {algorithm, ns};
  };
  // Within the scratch bound (0: none); the products are bounded by the 64-bit totals checked at init.
  auto fits = [&](int64_t scratch) { return agreed.scratchBound == 0 || scratch <= agreed.scratchBound; };
  if (agreed.kind && p > 2 && fits((p - 1) * agreed.maxBlockBytes)) {
    consider(AlltoallvAlgorithm::kBruckZeroCopy, AlltoallAlgorithm::kBruckZeroCopy, agreed.maxBlockBytes);
  }
  if (agreed.dense) consider(AlltoallvAlgorithm::kDirectWrite, AlltoallAlgorithm::kDirectWrite, meanBlock);
  // Its segment: two rows of every rank's outgoing bytes, at most p times the busiest rank's.
  if (nodes <= 1 && agreed.maxRankBytes <= kAutoSharedMemoryMaxBytes / (2 * p) &&
      fits(kSharedLine + 2 * roundToSharedLine(agreed.maxRankBytes))) {
    consider(AlltoallvAlgorithm::kSharedMemory, AlltoallAlgorithm::kSharedMemory, meanBlock);
  }
  return best;
}

Result<std::unique_ptr<PlanImpl>> makeAutoAlltoallv(Communicator& comm, Result<AlltoallvArgs> checked,
                                                    const AlltoallvOptions& options) {
  IBDT_ASSIGN_OR_RETURN(const AlltoallvAgreement agreed,
                        agreeOnAlltoallv(comm, checked.isOk() ? &*checked : nullptr, options.scratchBytes));
  IBDT_RETURN_IF_ERROR(checked.status());
  if (agreed.refused) {
    return makeError(Code::kInvalidArgument, "alltoallv: another rank's arguments were refused");
  }
  const AlltoallCostModel model = AlltoallCostModel::fromTuning(comm.context().tuning());
  const AlltoallvChoice choice = selectAlltoallv(model, comm.size(), agreed, comm.nodeCount());
  IBDT_LOG(kDebug, "alltoallv auto: p = ", comm.size(), ", blocks ", agreed.minBlockBytes, "..",
           agreed.maxBlockBytes, " B, busiest rank ", agreed.maxRankBytes, " B",
           agreed.scratchBound > 0 ? strCat(", scratch at most ", agreed.scratchBound, " B") : std::string(), ": ",
           alltoallvAlgorithmName(choice.algorithm),
           " (model ", model.fromFile() ? "from the tuning file" : "built in", ", predicted ",
           choice.predictedNs / 1e3, " us)");
  switch (choice.algorithm) {
    case AlltoallvAlgorithm::kBruckZeroCopy: return buildZeroCopyBruckAlltoallv(comm, *checked, *agreed.kind);
    case AlltoallvAlgorithm::kDirectWrite: return buildDirectWriteAlltoallv(comm, *checked);
    case AlltoallvAlgorithm::kSharedMemory: return makeSharedMemoryAlltoallv(comm, checked);
    default: return makeDirectAlltoallv(comm, std::move(checked).value(), options.throttle);
  }
}

}  // namespace ibdt::collectives
