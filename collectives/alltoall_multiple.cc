// Multiple alltoall (Jocksch, Kraushaar and Daverio, II-C): the rows of a
// process grid each run an alltoall, merged node by node by the
// hierarchical algorithm (collectives/alltoall_hierarchical.cc).
#include "collectives/alltoall_args.h"
#include "collectives/alltoall_hierarchical.h"

namespace ibdt::collectives {

Result<Plan> multipleAlltoallInit(Communicator& comm, Communicator& row, const void* sendbuf, int64_t sendcount,
                                  const datatype::Datatype& sendtype, void* recvbuf, int64_t recvcount,
                                  const datatype::Datatype& recvtype, const AlltoallOptions& options) {
  Result<AlltoallArgs> args = checkAlltoallArgs(row, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype);
  if (args.isOk() && &row.context() != &comm.context()) {
    args = makeError(Code::kInvalidArgument, "multiple alltoall: the row communicator is over another Context");
  }
  // The row is named by its rank 0's Context rank: rows are disjoint, so
  // no two share it. A bad argument still takes part in the agreement, so
  // every rank fails instead of waiting.
  const GroupPlace place{row.contextRank(0), row.rank(), row.size()};
  IBDT_ASSIGN_OR_RETURN(auto plan, makeNodeMergedAlltoall(comm, args, options, place, "multiple alltoall"));
  return Plan(std::move(plan));
}

Status multipleAlltoall(Communicator& comm, Communicator& row, const void* sendbuf, int64_t sendcount,
                        const datatype::Datatype& sendtype, void* recvbuf, int64_t recvcount,
                        const datatype::Datatype& recvtype, const AlltoallOptions& options, Deadline deadline) {
  IBDT_ASSIGN_OR_RETURN(Plan plan, multipleAlltoallInit(comm, row, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                                        recvtype, options));
  IBDT_RETURN_IF_ERROR(plan.start());
  return plan.wait(deadline);
}

}  // namespace ibdt::collectives
