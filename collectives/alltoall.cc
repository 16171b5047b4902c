// alltoall: argument checks, options, algorithm selection and the blocking
// call, shared by every alltoall algorithm.
#include <string>

#include "base/config.h"
#include "collectives/alltoall_args.h"
#include "collectives/alltoall_hierarchical.h"
#include "collectives/alltoall_pairwise.h"
#include "datatype/checked_math.h"

namespace ibdt::collectives {
namespace {

Status checkType(const datatype::Datatype& type, const char* which) {
  if (!type.valid()) return makeError(Code::kInvalidArgument, "alltoall: ", which, " is a null datatype");
  if (type.freed()) return makeError(Code::kState, "alltoall: ", which, " was freed");
  if (!type.committed()) return makeError(Code::kInvalidArgument, "alltoall: ", which, " is not committed");
  return Status::ok();
}

// count x extent per peer, and the offset of the last peer's block.
Result<int64_t> blockStride(int size, int64_t count, const datatype::Datatype& type, const char* which) {
  datatype::Checked checked;
  const int64_t stride = checked.mul(count, type.extent());
  checked.mul(stride, size - 1);
  checked.mul(count, type.size());
  if (checked.overflow) {
    return makeError(Code::kOverflow, "alltoall: ", which, " blocks of ", count, " elements of extent ",
                     type.extent(), " for ", size, " ranks overflow 64-bit offsets");
  }
  return stride;
}

}  // namespace

Result<AlltoallArgs> checkAlltoallArgs(const Communicator& comm, const void* sendbuf, int64_t sendcount,
                                       const datatype::Datatype& sendtype, void* recvbuf, int64_t recvcount,
                                       const datatype::Datatype& recvtype) {
  IBDT_RETURN_IF_ERROR(checkType(sendtype, "sendtype"));
  IBDT_RETURN_IF_ERROR(checkType(recvtype, "recvtype"));
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
    return makeError(Code::kInvalidArgument, "alltoall: rank ", comm.rank(), "'s send signature (", sendcount,
                     " x a ", sendtype.size(), "-byte type, ", send.elements,
                     " basic elements) differs from its receive signature (", recvcount, " x a ", recvtype.size(),
                     "-byte type, ", recv.elements, " basic elements); every pair must match exactly");
  }
  args.bytes = sendcount * sendtype.size();
  if (args.bytes > 0 && (sendbuf == nullptr || recvbuf == nullptr)) {
    return makeError(Code::kInvalidArgument, "alltoall: ", sendbuf == nullptr ? "sendbuf" : "recvbuf",
                     " is null but ", args.bytes, " bytes per pair move");
  }
  return args;
}

Result<AlltoallOptions> alltoallOptionsFromEnvironment() {
  AlltoallOptions options;
  IBDT_ASSIGN_OR_RETURN(options.throttle, config::getInt("IBDT_ALLTOALL_THROTTLE", 0, int64_t{1} << 30));
  IBDT_ASSIGN_OR_RETURN(int64_t leaders, config::getInt("IBDT_ALLTOALL_LEADERS", 1, 1024));
  options.leaders = static_cast<int>(leaders);
  return options;
}

Result<Plan> alltoallInit(Communicator& comm, const void* sendbuf, int64_t sendcount,
                          const datatype::Datatype& sendtype, void* recvbuf, int64_t recvcount,
                          const datatype::Datatype& recvtype, const AlltoallOptions& options) {
  Result<AlltoallArgs> checked = checkAlltoallArgs(comm, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype);
  if (options.algorithm == AlltoallAlgorithm::kHierarchical) {
    // Its init is collective: a rank with bad arguments still takes part,
    // so every rank fails instead of waiting for it.
    IBDT_ASSIGN_OR_RETURN(auto hierarchical, makeHierarchicalAlltoall(comm, checked, options.leaders));
    return Plan(std::move(hierarchical));
  }
  if (options.throttle < 0) {
    return makeError(Code::kInvalidArgument, "alltoall: throttle ", options.throttle, " (0: unlimited, else >= 1)");
  }
  IBDT_ASSIGN_OR_RETURN(AlltoallArgs args, std::move(checked));
  switch (options.algorithm) {
    case AlltoallAlgorithm::kAuto:  // no selection yet
    case AlltoallAlgorithm::kPairwise: {
      IBDT_ASSIGN_OR_RETURN(auto pairwise, makePairwiseAlltoall(comm, args, options.throttle));
      return Plan(std::move(pairwise));
    }
    case AlltoallAlgorithm::kHierarchical:
      break;  // above
  }
  return makeError(Code::kInvalidArgument, "alltoall: unknown algorithm ", static_cast<int>(options.algorithm));
}

Status alltoall(Communicator& comm, const void* sendbuf, int64_t sendcount, const datatype::Datatype& sendtype,
                void* recvbuf, int64_t recvcount, const datatype::Datatype& recvtype, const AlltoallOptions& options,
                Deadline deadline) {
  IBDT_ASSIGN_OR_RETURN(Plan plan,
                        alltoallInit(comm, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, options));
  IBDT_RETURN_IF_ERROR(plan.start());
  return plan.wait(deadline);
}

}  // namespace ibdt::collectives
