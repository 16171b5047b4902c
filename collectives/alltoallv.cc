// alltoallv: options, algorithm selection and the blocking call.
#include "base/config.h"
#include "collectives/alltoallv_algorithms.h"
#include "collectives/alltoallv_args.h"
#include "collectives/alltoallv_mailbox_calls.h"
#include "collectives/alltoallv_select.h"
#include "collectives/alltoallv_shared_memory.h"

namespace ibdt::collectives {

Result<AlltoallvOptions> alltoallvOptionsFromEnvironment() {
  AlltoallvOptions options;
  IBDT_ASSIGN_OR_RETURN(options.throttle, config::getInt("IBDT_ALLTOALL_THROTTLE", 0, int64_t{1} << 30));
  IBDT_ASSIGN_OR_RETURN(uint64_t bytes, config::getSize("IBDT_ALLTOALLV_INPLACE_BYTES"));
  if (bytes == 0 || bytes > (uint64_t{1} << 40)) {
    return makeError(Code::kInvalidArgument, "IBDT_ALLTOALLV_INPLACE_BYTES: ", bytes,
                     " (auxiliary memory of the in-place alltoallv: 1 .. 1T bytes)");
  }
  options.inplaceBytes = static_cast<int64_t>(bytes);
  IBDT_ASSIGN_OR_RETURN(options.inplaceBuffers, config::getInt("IBDT_ALLTOALLV_INPLACE_BUFFERS", 0, 1 << 20));
  IBDT_ASSIGN_OR_RETURN(uint64_t scratch, config::getSize("IBDT_ALLTOALLV_SCRATCH_BYTES"));
  if (scratch > (uint64_t{1} << 40)) {
    return makeError(Code::kInvalidArgument, "IBDT_ALLTOALLV_SCRATCH_BYTES: ", scratch,
                     " (extra memory per rank auto's alltoallv may hold: 0 (no bound) .. 1T bytes)");
  }
  options.scratchBytes = static_cast<int64_t>(scratch);
  // The names alltoallvAlgorithmName gives (in place is chosen by the call, not by name).
  constexpr AlltoallvAlgorithm kByChoice[] = {AlltoallvAlgorithm::kAuto, AlltoallvAlgorithm::kPairwise,
                                             AlltoallvAlgorithm::kBruckZeroCopy, AlltoallvAlgorithm::kDirectWrite,
                                             AlltoallvAlgorithm::kSharedMemory};
  std::string_view names[std::size(kByChoice)];
  for (size_t i = 0; i < std::size(kByChoice); ++i) names[i] = alltoallvAlgorithmName(kByChoice[i]);
  IBDT_ASSIGN_OR_RETURN(int algorithm, config::getChoice("IBDT_ALLTOALLV_ALGORITHM", names));
  options.algorithm = kByChoice[algorithm];
  return options;
}

namespace {

std::string_view planName(const Result<std::unique_ptr<PlanImpl>>& impl) {
  return impl.isOk() ? (*impl)->algorithm() : std::string_view();
}

// The plan of the algorithm `options` names (kAuto already resolved or
// left to pairwise / in place).
Result<std::unique_ptr<PlanImpl>> buildNamed(Communicator& comm, Result<AlltoallvArgs> checked,
                                             const AlltoallvOptions& options) {
  // Collective inits: a rank whose arguments failed still takes part.
  if (options.algorithm == AlltoallvAlgorithm::kDirectWrite) {
    return makeDirectWriteAlltoallv(comm, std::move(checked), options.throttle);
  }
  if (options.algorithm == AlltoallvAlgorithm::kSharedMemory) return makeSharedMemoryAlltoallv(comm, checked);
  const bool inPlace = checked.isOk() && checked->inPlace;
  if (options.algorithm == AlltoallvAlgorithm::kBruckZeroCopy && !inPlace) {
    return makeZeroCopyBruckAlltoallv(comm, std::move(checked));
  }
  IBDT_ASSIGN_OR_RETURN(AlltoallvArgs args, std::move(checked));
  // In place is used whenever the caller passes in place.
  AlltoallvAlgorithm algorithm = args.inPlace                                   ? AlltoallvAlgorithm::kInPlaceLimited
                                 : options.algorithm == AlltoallvAlgorithm::kAuto ? AlltoallvAlgorithm::kPairwise
                                                                                  : options.algorithm;
  if ((algorithm == AlltoallvAlgorithm::kInPlaceLimited) != args.inPlace) {
    return makeError(Code::kInvalidArgument, "alltoallv: the in-place algorithm runs exactly when sendbuf is kInPlace");
  }
  if (algorithm == AlltoallvAlgorithm::kPairwise) return makeDirectAlltoallv(comm, std::move(args), options.throttle);
  const int64_t buffers = options.inplaceBuffers > 0 ? options.inplaceBuffers : std::max(1, comm.size() / 8);
  return makeInPlaceAlltoallv(comm, std::move(args), options.throttle, options.inplaceBytes, buffers);
}

// alltoallvInit and the blocking call. kAuto is collective (the agreement
// of alltoallv_select.h, or in place on one node the shared-memory init's
// allgather) only where every rank builds the plan together and keeps it:
// not `perCall` (measured: the allreduce costs more than it saves for one
// run, docs/alltoallv.md) nor under a pinned tag.
Result<Plan> buildAlltoallv(Communicator& comm, const void* sendbuf, std::span<const int64_t> sendcounts,
                            std::span<const int64_t> sdispls, const datatype::Datatype& sendtype, void* recvbuf,
                            std::span<const int64_t> recvcounts, std::span<const int64_t> rdispls,
                            const datatype::Datatype& recvtype, const AlltoallvOptions& options, bool perCall) {
  const bool automatic = options.algorithm == AlltoallvAlgorithm::kAuto && sendbuf != kInPlace;
  const bool agree = automatic && !perCall && !comm.planTagPinned();
  // In place on one node: shared-memory when every rank's share fits.
  const bool sharedInPlace = options.algorithm == AlltoallvAlgorithm::kAuto && sendbuf == kInPlace && !perCall &&
                             !comm.planTagPinned() && comm.nodeCount() == 1 && comm.size() > 1;
  Status bad;
  if (options.throttle < 0) {
    bad = makeError(Code::kInvalidArgument, "alltoallv: throttle ", options.throttle, " (0: unlimited, else >= 1)");
  } else if (options.scratchBytes < 0) {
    bad = makeError(Code::kInvalidArgument, "alltoallv: scratch bound ", options.scratchBytes, " bytes (0: none)");
  } else if (options.inplaceBytes <= 0 || options.inplaceBuffers < 0) {
    bad = makeError(Code::kInvalidArgument, "alltoallv: in-place auxiliary memory ", options.inplaceBytes,
                    " bytes in ", options.inplaceBuffers, " buffers (bytes >= 1 element, buffers >= 0)");
  }
  if (!bad.isOk() && !agree && !sharedInPlace) return bad;
  Result<AlltoallvArgs> checked =
      bad.isOk() ? checkAlltoallvArgs(comm, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                                      recvtype)
                 : Result<AlltoallvArgs>(bad);
  Result<std::unique_ptr<PlanImpl>> impl = agree ? makeAutoAlltoallv(comm, std::move(checked), options)
                                                 : Result<std::unique_ptr<PlanImpl>>(std::unique_ptr<PlanImpl>());
  if (!agree && sharedInPlace) {
    // Every rank returns the same verdict: a plan, an error, or declined.
    impl = makeSharedMemoryAlltoallv(comm, checked, options.inplaceBytes);
  }
  if (impl.isOk() && *impl == nullptr) impl = buildNamed(comm, std::move(checked), options);
  if (!impl.isOk()) return std::move(impl).takeStatus();
  comm.countAlgorithm("alltoallv", planName(impl), options.algorithm == AlltoallvAlgorithm::kAuto);
  return Plan(std::move(impl).value());
}

}  // namespace

Result<Plan> alltoallvInit(Communicator& comm, const void* sendbuf, std::span<const int64_t> sendcounts,
                           std::span<const int64_t> sdispls, const datatype::Datatype& sendtype, void* recvbuf,
                           std::span<const int64_t> recvcounts, std::span<const int64_t> rdispls,
                           const datatype::Datatype& recvtype, const AlltoallvOptions& options) {
  return buildAlltoallv(comm, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, options,
                        false);
}

Status alltoallv(Communicator& comm, const void* sendbuf, std::span<const int64_t> sendcounts,
                 std::span<const int64_t> sdispls, const datatype::Datatype& sendtype, void* recvbuf,
                 std::span<const int64_t> recvcounts, std::span<const int64_t> rdispls,
                 const datatype::Datatype& recvtype, const AlltoallvOptions& options, Deadline deadline) {
  // One node: the communicator's mailbox, unless this call's blocks do not
  // fit (alike on every rank; alltoallv_mailbox_calls.h).
  if (options.algorithm == AlltoallvAlgorithm::kAuto && !comm.planTagPinned() && comm.nodeCount() == 1 &&
      comm.size() > 1 && options.inplaceBytes > 0) {
    Status outcome;
    IBDT_ASSIGN_OR_RETURN(bool ran, alltoallvThroughMailbox(comm, sendbuf, sendcounts, sdispls, sendtype, recvbuf,
                                                            recvcounts, rdispls, recvtype, options, deadline,
                                                            outcome));
    if (ran) return outcome;
  }
  IBDT_ASSIGN_OR_RETURN(Plan plan, buildAlltoallv(comm, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                                                  rdispls, recvtype, options, true));
  IBDT_RETURN_IF_ERROR(plan.start());
  return plan.wait(deadline);
}

}  // namespace ibdt::collectives
