// MPI_Alltoall on ibdt, with a collective agreement and the plan cache.
#include "mpi/alltoall_call.h"

#include "mpi/comm_state.h"
#include "mpi/type_convert.h"

namespace ibdt::mpi {
namespace {

// What each rank brings to the agreement (the minimum over ranks decides).
enum Vote : int { kCannot = 0, kNewPlan = 1, kSamePlan = 2 };

}  // namespace

bool runOnIbdt(CommState& state, const AlltoallArgs& args, MPI_Comm comm, Status& status, std::string& why) {
  // MPI_IN_PLACE ignores sendcount and sendtype (often MPI_DATATYPE_NULL):
  // the blocks leave from recvbuf as recvcount x recvtype.
  const bool inPlace = args.sendbuf == MPI_IN_PLACE;
  auto recv = convertType(args.recvtype);
  auto send = inPlace ? recv : convertType(args.sendtype);
  AlltoallCache::Key key;
  int vote = kCannot;
  if (send.isOk() && recv.isOk()) {
    key = {args.sendbuf, args.sendcount, send->id(), send->version(),
           args.recvbuf, args.recvcount, recv->id(), recv->version()};
    vote = state.lastAlltoall.plan.valid() && state.lastAlltoall.key == key ? kSamePlan : kNewPlan;
  }
  // Every rank must take the same path, and build a plan when any rank does
  // (a plan takes the communicator's next tag at init).
  int agreed = kCannot;
  PMPI_Allreduce(&vote, &agreed, 1, MPI_INT, MPI_MIN, comm);
  if (agreed == kCannot) {
    why = !send.isOk()   ? send.status().toString()
          : !recv.isOk() ? recv.status().toString()
                         : "a datatype did not convert on another rank";
    return false;
  }
  if (agreed == kNewPlan) {
    state.lastAlltoall = AlltoallCache{};  // releases the old plan and its types
    auto plan = collectives::alltoallInit(*state.comm, inPlace ? collectives::kInPlace : args.sendbuf,
                                          inPlace ? args.recvcount : args.sendcount, *send, args.recvbuf,
                                          args.recvcount, *recv, state.alltoall);
    if (!plan.isOk()) {
      status = plan.status();
      return true;
    }
    state.lastAlltoall = AlltoallCache{key, std::move(*plan)};
  }
  status = state.lastAlltoall.plan.start();
  if (status.isOk()) status = state.lastAlltoall.plan.wait();
  return true;
}

}  // namespace ibdt::mpi
