// alltoall: argument checks, options, algorithm selection and the blocking
// call, shared by every alltoall algorithm.
#include <optional>
#include <string>

#include "base/checked_math.h"
#include "base/config.h"
#include "base/log.h"
#include "base/parse_integer.h"
#include "collectives/alltoall_args.h"
#include "collectives/alltoall_bruck.h"
#include "collectives/alltoall_direct_write.h"
#include "collectives/alltoall_hierarchical.h"
#include "collectives/alltoall_pairwise.h"
#include "collectives/alltoall_select.h"
#include "collectives/alltoall_shared_memory.h"

namespace ibdt::collectives {
namespace {

// count x extent per peer, and the offset of the last peer's block.
Result<int64_t> blockStride(int size, int64_t count, const datatype::Datatype& type, const char* which) {
  Checked checked;
  const int64_t stride = checked.mul(count, type.extent());
  checked.mul(stride, size - 1);
  checked.mul(count, type.size());
  if (checked.overflow) {
    return makeError(Code::kOverflow, "alltoall: ", which, " blocks of ", count, " elements of extent ", type.extent(),
                     " for ", size, " ranks overflow 64-bit offsets");
  }
  return stride;
}

}  // namespace

Status checkCommittedType(const char* op, const datatype::Datatype& type, const char* which) {
  if (!type.valid()) return makeError(Code::kInvalidArgument, op, ": ", which, " is a null datatype");
  if (type.freed()) return makeError(Code::kState, op, ": ", which, " was freed");
  if (!type.committed()) return makeError(Code::kInvalidArgument, op, ": ", which, " is not committed");
  return Status::ok();
}

namespace {

// The checks; `inPlace`: the send side is the receive side (kInPlace).
Result<AlltoallArgs> checkArgs(const Communicator& comm, const void* sendbuf, int64_t sendcount,
                               const datatype::Datatype& sendtype, void* recvbuf, int64_t recvcount,
                               const datatype::Datatype& recvtype, bool inPlace) {
  IBDT_RETURN_IF_ERROR(checkCommittedType("alltoall", sendtype, "sendtype"));
  IBDT_RETURN_IF_ERROR(checkCommittedType("alltoall", recvtype, "recvtype"));
  if (sendcount < 0 || recvcount < 0) {
    return makeError(Code::kInvalidArgument, "alltoall: negative count (sendcount ", sendcount, ", recvcount ",
                     recvcount, ")");
  }
  AlltoallArgs args;
  args.sendbuf = static_cast<const std::byte*>(sendbuf);
  args.sendcount = sendcount;
  args.sendtype = sendtype;
  args.recvbuf = static_cast<std::byte*>(recvbuf);
  args.recvcount = recvcount;
  args.recvtype = recvtype;
  IBDT_ASSIGN_OR_RETURN(args.sendStride, blockStride(comm.size(), sendcount, sendtype, "send"));
  IBDT_ASSIGN_OR_RETURN(args.recvStride, blockStride(comm.size(), recvcount, recvtype, "receive"));
  IBDT_ASSIGN_OR_RETURN(datatype::Signature send, datatype::signature(sendtype, sendcount));
  IBDT_ASSIGN_OR_RETURN(datatype::Signature recv, datatype::signature(recvtype, recvcount));
  if (send != recv) {
    return makeError(Code::kInvalidArgument, "alltoall: rank ", comm.rank(), "'s send signature (", sendcount, " x a ",
                     sendtype.size(), "-byte type, ", send.elements,
                     " basic elements) differs from its receive signature (", recvcount, " x a ", recvtype.size(),
                     "-byte type, ", recv.elements, " basic elements); every pair must match exactly");
  }
  args.bytes = sendcount * sendtype.size();
  args.inPlace = inPlace;
  if (args.bytes > 0 && sendbuf == recvbuf && !inPlace) {
    return makeError(Code::kInvalidArgument,
                     "alltoall: sendbuf is recvbuf; pass collectives::kInPlace as sendbuf "
                     "to exchange in place");
  }
  if (args.bytes > 0 && (sendbuf == nullptr || recvbuf == nullptr)) {
    return makeError(Code::kInvalidArgument, "alltoall: ", sendbuf == nullptr ? "sendbuf" : "recvbuf", " is null but ",
                     args.bytes, " bytes per pair move");
  }
  return args;
}

}  // namespace

const std::byte kInPlaceMarker{};

Result<AlltoallArgs> checkAlltoallArgs(const Communicator& comm, const void* sendbuf, int64_t sendcount,
                                       const datatype::Datatype& sendtype, void* recvbuf, int64_t recvcount,
                                       const datatype::Datatype& recvtype) {
  if (sendbuf == kInPlace) return checkArgs(comm, recvbuf, recvcount, recvtype, recvbuf, recvcount, recvtype, true);
  return checkArgs(comm, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, false);
}

namespace {
// Indexed by AlltoallAlgorithm.
constexpr std::string_view kAlgorithmNames[] = {"auto",           "pairwise",        "bruck-basic",
                                                "bruck-modified", "bruck-zero-copy", "bruck-radix",
                                                "hierarchical",   "direct-write",    "shared-memory"};
}  // namespace

// Indexed by LeaderExchange.
constexpr std::string_view kLeaderExchangeNames[] = {"auto", "direct", "bruck"};

std::string_view leaderExchangeName(LeaderExchange exchange) {
  const auto index = static_cast<size_t>(exchange);
  return index < std::size(kLeaderExchangeNames) ? kLeaderExchangeNames[index] : "unknown";
}

std::string_view alltoallAlgorithmName(AlltoallAlgorithm algorithm) {
  const auto index = static_cast<size_t>(algorithm);
  return index < std::size(kAlgorithmNames) ? kAlgorithmNames[index] : "unknown";
}

Result<AlltoallAlgorithm> parseAlltoallAlgorithm(std::string_view name) {
  for (size_t i = 0; i < std::size(kAlgorithmNames); ++i) {
    if (name == kAlgorithmNames[i]) return static_cast<AlltoallAlgorithm>(i);
  }
  return makeError(Code::kInvalidArgument, "alltoall: unknown algorithm \"", name,
                   "\" (auto, pairwise, bruck-basic, bruck-modified, bruck-zero-copy, bruck-radix, hierarchical, "
                   "direct-write, shared-memory)");
}

Result<AlltoallOptions> withAlltoallAlgorithm(AlltoallOptions options, std::string_view name) {
  constexpr std::string_view kRadixPrefix = "bruck-radix-";
  constexpr int64_t kMaxRadix = 4096;  // AlltoallChoice::code() packs the radix in 12 bits
  if (!name.starts_with(kRadixPrefix)) {
    IBDT_ASSIGN_OR_RETURN(options.algorithm, parseAlltoallAlgorithm(name));
    return options;
  }
  const std::optional<int64_t> radix = parseCanonicalPositive(name.substr(kRadixPrefix.size()), kMaxRadix);
  if (!radix || *radix < 2) {
    return makeError(Code::kInvalidArgument, "alltoall: \"", name.substr(0, 64), "\": radix must be an integer in [2, ",
                     kMaxRadix, ")");
  }
  options.algorithm = AlltoallAlgorithm::kBruckRadix;
  options.radix = *radix;
  return options;
}

Result<AlltoallOptions> alltoallOptionsFromEnvironment() {
  AlltoallOptions options;
  IBDT_ASSIGN_OR_RETURN(options.throttle, config::getInt("IBDT_ALLTOALL_THROTTLE", 0, int64_t{1} << 30));
  IBDT_ASSIGN_OR_RETURN(options.radix, config::getInt("IBDT_ALLTOALL_RADIX", 2, int64_t{1} << 30));
  IBDT_ASSIGN_OR_RETURN(int algorithm, config::getChoice("IBDT_ALLTOALL_ALGORITHM",
                                                         {kAlgorithmNames[0], kAlgorithmNames[1], kAlgorithmNames[2],
                                                          kAlgorithmNames[3], kAlgorithmNames[4], kAlgorithmNames[5],
                                                          kAlgorithmNames[6], kAlgorithmNames[7], kAlgorithmNames[8]}));
  options.algorithm = static_cast<AlltoallAlgorithm>(algorithm);
  IBDT_ASSIGN_OR_RETURN(int64_t leaders, config::getInt("IBDT_ALLTOALL_LEADERS", 1, 1024));
  options.leaders = static_cast<int>(leaders);
  IBDT_ASSIGN_OR_RETURN(int exchange,
                        config::getChoice("IBDT_ALLTOALL_LEADER_EXCHANGE",
                                          {kLeaderExchangeNames[0], kLeaderExchangeNames[1], kLeaderExchangeNames[2]}));
  options.leaderExchange = static_cast<LeaderExchange>(exchange);
  return options;
}

namespace {

// The bytes per block a rank whose arguments failed votes with: its receive
// side as given, so that where the others' choice is direct-write (whose
// init is collective) it most likely chooses it too and fails them all
// instead of leaving them waiting.
int64_t bytesOfFailedCall(int64_t recvcount, const datatype::Datatype& recvtype) {
  if (!recvtype.valid() || recvtype.freed() || recvcount < 0) return 0;
  Checked checked;
  const int64_t bytes = checked.mul(recvcount, recvtype.size());
  return checked.overflow ? 0 : bytes;
}

// kAuto: the cheapest algorithm by the cost model of the Context's tuning
// file (alltoall_select.h). Ranks of one node load the same file; across
// nodes the files may differ, so there the ranks agree on the smallest
// choice in one allreduce (so the hierarchical alltoall, a candidate on
// several nodes only, is run by every rank or by none). A rank whose
// arguments failed still takes part (its vote is pairwise, or a collective
// init it would join), so no rank waits for it. `collectiveInit`: every
// rank builds this plan together (no pinned tag), so direct-write, whose
// init exchanges keys, is a candidate. `perCall`: the blocking call, whose
// plan runs once, so each candidate's measured init is priced too.
// `unlessDense`: where the choice is direct-write on one node, the choice
// without it, which direct-write's vote runs on every rank when some rank's
// types are not dense blocks (the model knows bytes, not layouts).
Result<AlltoallOptions> resolveAuto(Communicator& comm, const Result<AlltoallArgs>& checked, int64_t failedBytes,
                                    AlltoallOptions options, bool collectiveInit, bool perCall,
                                    std::optional<AlltoallOptions>& unlessDense) {
  AlltoallCostModel model = AlltoallCostModel::fromTuning(comm.context().tuning());
  // The hierarchical plan's form follows the messaging layer's single copy (its agreement's vote).
  model.setRelayed([&comm](int64_t chunk) { return comm.context().exchangeSingleCopy(comm.contextId(), chunk); });
  const int64_t bytes = checked.isOk() ? checked->bytes : failedBytes;
  // In place is refused by direct-write (a peer's write would land on a block not yet sent).
  const bool inPlace = checked.isOk() && checked->inPlace;
  AlltoallChoice choice = selectAlltoall(model, comm.size(), bytes, collectiveInit, comm.nodeCount(), perCall, inPlace);
  // A failed rank keeps a collective init's vote (direct-write, hierarchical): it joins that init and fails it.
  const bool collectiveChoice = choice.algorithm == AlltoallAlgorithm::kDirectWrite ||
                                choice.algorithm == AlltoallAlgorithm::kHierarchical ||
                                choice.algorithm == AlltoallAlgorithm::kSharedMemory;
  if (!checked.isOk() && !collectiveChoice) choice = AlltoallChoice{};
  if (comm.nodeCount() > 1) {
    int64_t code = choice.code();
    IBDT_RETURN_IF_ERROR(allreduce(comm, &code, &code, 1, ReduceOp::kMin));
    choice = AlltoallChoice::fromCode(code);
  }
  IBDT_LOG(kDebug, "alltoall auto: p = ", comm.size(), ", ", bytes,
           " B per block: ", alltoallAlgorithmName(choice.algorithm), " (radix ", choice.radix, ", model ",
           model.fromFile() ? "from the tuning file" : "built in", ", predicted ", choice.predictedNs / 1e3, " us)");
  if (choice.algorithm == AlltoallAlgorithm::kDirectWrite && comm.nodeCount() == 1) {
    // Ranks of one node load the same file: the same second choice everywhere.
    const AlltoallChoice second = selectAlltoall(model, comm.size(), bytes, collectiveInit, 1, perCall, true);
    unlessDense = options;
    unlessDense->algorithm = second.algorithm;
    unlessDense->radix = second.radix;
  }
  options.algorithm = choice.algorithm;
  options.radix = choice.radix;
  return options;
}

}  // namespace

bool alltoallInitIsCollective(const Communicator& comm, const AlltoallOptions& options) {
  return options.algorithm == AlltoallAlgorithm::kHierarchical ||
         options.algorithm == AlltoallAlgorithm::kDirectWrite ||
         options.algorithm == AlltoallAlgorithm::kSharedMemory ||
         (options.algorithm == AlltoallAlgorithm::kAuto && comm.nodeCount() > 1);
}

namespace {

Result<std::unique_ptr<PlanImpl>> buildLocal(Communicator& comm, const AlltoallArgs& args,
                                              const AlltoallOptions& options);

// The algorithm's plan for the resolved `options` (`unlessDense`: see resolveAuto).
Result<Plan> buildResolved(Communicator& comm, Result<AlltoallArgs> checked, const AlltoallOptions& options,
                           const std::optional<AlltoallOptions>& unlessDense) {
  if (options.algorithm == AlltoallAlgorithm::kHierarchical) {
    // Its init is collective: a rank with bad arguments still takes part,
    // so every rank fails instead of waiting for it.
    IBDT_ASSIGN_OR_RETURN(auto hierarchical, makeHierarchicalAlltoall(comm, checked, options));
    return Plan(std::move(hierarchical));
  }
  if (options.algorithm == AlltoallAlgorithm::kDirectWrite) {
    if (options.throttle < 0) checked = makeError(Code::kInvalidArgument, "alltoall: throttle ", options.throttle);
    // Collective init too (keys are exchanged): every rank takes part.
    AlltoallBuild instead;
    if (unlessDense && unlessDense->algorithm == AlltoallAlgorithm::kSharedMemory) {
      instead = [&comm](const AlltoallArgs& args) { return makeSharedMemoryAlltoall(comm, args); };
    } else if (unlessDense) {
      instead = [&](const AlltoallArgs& args) { return buildLocal(comm, args, *unlessDense); };
    }
    IBDT_ASSIGN_OR_RETURN(auto direct, makeDirectWriteAlltoall(comm, checked, options.throttle, instead));
    return Plan(std::move(direct));
  }
  if (options.algorithm == AlltoallAlgorithm::kSharedMemory) {
    // Collective init (the segment is created and mapped): every rank takes part.
    IBDT_ASSIGN_OR_RETURN(auto shared, makeSharedMemoryAlltoall(comm, checked));
    return Plan(std::move(shared));
  }
  if (options.throttle < 0) {
    return makeError(Code::kInvalidArgument, "alltoall: throttle ", options.throttle, " (0: unlimited, else >= 1)");
  }
  if (options.radix < 2) {
    return makeError(Code::kInvalidArgument, "alltoall: radix ", options.radix, " (must be >= 2)");
  }
  IBDT_ASSIGN_OR_RETURN(AlltoallArgs args, std::move(checked));
  IBDT_ASSIGN_OR_RETURN(std::unique_ptr<PlanImpl> impl, buildLocal(comm, args, options));
  return Plan(std::move(impl));
}

// The plan of an algorithm whose init is local (no peer takes part).
Result<std::unique_ptr<PlanImpl>> buildLocal(Communicator& comm, const AlltoallArgs& args,
                                              const AlltoallOptions& options) {
  Result<std::unique_ptr<PlanImpl>> impl =
      makeError(Code::kInvalidArgument, "alltoall: unknown algorithm ", static_cast<int>(options.algorithm));
  switch (options.algorithm) {
    case AlltoallAlgorithm::kAuto:  // resolved above
    case AlltoallAlgorithm::kPairwise:
      impl = makePairwiseAlltoall(comm, args, options.throttle);
      break;
    case AlltoallAlgorithm::kBruckBasic:
      impl = makeBasicBruckAlltoall(comm, args);
      break;
    case AlltoallAlgorithm::kBruckModified:
      impl = makeModifiedBruckAlltoall(comm, args, 2);
      break;
    case AlltoallAlgorithm::kBruckZeroCopy:
      impl = makeZeroCopyBruckAlltoall(comm, args);
      break;
    case AlltoallAlgorithm::kBruckRadix:
      impl = makeModifiedBruckAlltoall(comm, args, options.radix);
      break;
    case AlltoallAlgorithm::kHierarchical:
    case AlltoallAlgorithm::kDirectWrite:
    case AlltoallAlgorithm::kSharedMemory:
      break;  // collective: buildResolved's
  }
  return impl;
}

// alltoallInit and the blocking call; `perCall`: the plan runs once, so
// kAuto prices each candidate's init as well (direct-write's key exchange
// only where ibdt-tune measured it, docs/alltoall-selection.md).
Result<Plan> buildAlltoall(Communicator& comm, const void* sendbuf, int64_t sendcount,
                           const datatype::Datatype& sendtype, void* recvbuf, int64_t recvcount,
                           const datatype::Datatype& recvtype, const AlltoallOptions& requested, bool perCall) {
  Result<AlltoallArgs> checked = checkAlltoallArgs(comm, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype);
  AlltoallOptions options = requested;
  const bool automatic = options.algorithm == AlltoallAlgorithm::kAuto;
  std::optional<AlltoallOptions> unlessDense;
  if (automatic) {
    // Every rank calls the blocking alltoall together, as it calls init; a
    // build under a pinned tag may happen on one rank alone.
    const bool collectiveInit = !comm.planTagPinned();
    IBDT_ASSIGN_OR_RETURN(options, resolveAuto(comm, checked, bytesOfFailedCall(recvcount, recvtype), requested,
                                               collectiveInit, perCall, unlessDense));
  }
  IBDT_ASSIGN_OR_RETURN(Plan plan, buildResolved(comm, std::move(checked), options, unlessDense));
  comm.countAlgorithm("alltoall", plan.algorithm(), automatic);
  return plan;
}

}  // namespace

Result<Plan> alltoallInit(Communicator& comm, const void* sendbuf, int64_t sendcount,
                          const datatype::Datatype& sendtype, void* recvbuf, int64_t recvcount,
                          const datatype::Datatype& recvtype, const AlltoallOptions& options) {
  return buildAlltoall(comm, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, options, false);
}

Status alltoall(Communicator& comm, const void* sendbuf, int64_t sendcount, const datatype::Datatype& sendtype,
                void* recvbuf, int64_t recvcount, const datatype::Datatype& recvtype, const AlltoallOptions& options,
                Deadline deadline) {
  IBDT_ASSIGN_OR_RETURN(Plan plan,
                        buildAlltoall(comm, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, options, true));
  IBDT_RETURN_IF_ERROR(plan.start());
  return plan.wait(deadline);
}

}  // namespace ibdt::collectives
