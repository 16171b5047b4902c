// alltoallv: options, algorithm selection and the blocking call.
#include "base/config.h"
#include "collectives/alltoallv_algorithms.h"
#include "collectives/alltoallv_args.h"

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
  IBDT_ASSIGN_OR_RETURN(int algorithm, config::getChoice("IBDT_ALLTOALLV_ALGORITHM", {"auto", "pairwise", "bruck-zero-copy", "direct-write"}));
  constexpr AlltoallvAlgorithm kByChoice[] = {AlltoallvAlgorithm::kAuto, AlltoallvAlgorithm::kPairwise,
                                             AlltoallvAlgorithm::kBruckZeroCopy, AlltoallvAlgorithm::kDirectWrite};
  options.algorithm = kByChoice[algorithm];
  return options;
}

Result<Plan> alltoallvInit(Communicator& comm, const void* sendbuf, std::span<const int64_t> sendcounts,
                           std::span<const int64_t> sdispls, const datatype::Datatype& sendtype, void* recvbuf,
                           std::span<const int64_t> recvcounts, std::span<const int64_t> rdispls,
                           const datatype::Datatype& recvtype, const AlltoallvOptions& options) {
  if (options.throttle < 0) {
    return makeError(Code::kInvalidArgument, "alltoallv: throttle ", options.throttle, " (0: unlimited, else >= 1)");
  }
  if (options.inplaceBytes <= 0 || options.inplaceBuffers < 0) {
    return makeError(Code::kInvalidArgument, "alltoallv: in-place auxiliary memory ", options.inplaceBytes,
                     " bytes in ", options.inplaceBuffers, " buffers (bytes >= 1 element, buffers >= 0)");
  }
  Result<AlltoallvArgs> checked =
      checkAlltoallvArgs(comm, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype);
  // Collective inits: a rank whose arguments failed still takes part.
  if (options.algorithm == AlltoallvAlgorithm::kDirectWrite) {
    IBDT_ASSIGN_OR_RETURN(auto direct, makeDirectWriteAlltoallv(comm, std::move(checked), options.throttle));
    return Plan(std::move(direct));
  }
  if (options.algorithm == AlltoallvAlgorithm::kBruckZeroCopy && sendbuf != kInPlace) {
    IBDT_ASSIGN_OR_RETURN(auto bruck, makeZeroCopyBruckAlltoallv(comm, std::move(checked)));
    return Plan(std::move(bruck));
  }
  IBDT_ASSIGN_OR_RETURN(AlltoallvArgs args, std::move(checked));
  // In place is used whenever the caller passes in place.
  AlltoallvAlgorithm algorithm = args.inPlace                                   ? AlltoallvAlgorithm::kInPlaceLimited
                                 : options.algorithm == AlltoallvAlgorithm::kAuto ? AlltoallvAlgorithm::kPairwise
                                                                                  : options.algorithm;
  if ((algorithm == AlltoallvAlgorithm::kInPlaceLimited) != args.inPlace) {
    return makeError(Code::kInvalidArgument, "alltoallv: the in-place algorithm runs exactly when sendbuf is kInPlace");
  }
  switch (algorithm) {
    case AlltoallvAlgorithm::kPairwise: {
      IBDT_ASSIGN_OR_RETURN(auto direct, makeDirectAlltoallv(comm, std::move(args), options.throttle));
      return Plan(std::move(direct));
    }
    case AlltoallvAlgorithm::kInPlaceLimited: {
      const int64_t buffers = options.inplaceBuffers > 0 ? options.inplaceBuffers : std::max(1, comm.size() / 8);
      IBDT_ASSIGN_OR_RETURN(auto inPlace, makeInPlaceAlltoallv(comm, std::move(args), options.throttle,
                                                               options.inplaceBytes, buffers));
      return Plan(std::move(inPlace));
    }
    case AlltoallvAlgorithm::kAuto:
    case AlltoallvAlgorithm::kBruckZeroCopy:  // above
    case AlltoallvAlgorithm::kDirectWrite:
      break;
  }
  return makeError(Code::kInvalidArgument, "alltoallv: unknown algorithm ", static_cast<int>(options.algorithm));
}

Status alltoallv(Communicator& comm, const void* sendbuf, std::span<const int64_t> sendcounts,
                 std::span<const int64_t> sdispls, const datatype::Datatype& sendtype, void* recvbuf,
                 std::span<const int64_t> recvcounts, std::span<const int64_t> rdispls,
                 const datatype::Datatype& recvtype, const AlltoallvOptions& options, Deadline deadline) {
  IBDT_ASSIGN_OR_RETURN(Plan plan, alltoallvInit(comm, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                                                 rdispls, recvtype, options));
  IBDT_RETURN_IF_ERROR(plan.start());
  return plan.wait(deadline);
}

}  // namespace ibdt::collectives
