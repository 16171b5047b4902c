// Direct (pairwise) alltoall: the shared cyclic round driver over the
// regular blocks of MPI_Alltoall.
#include "collectives/alltoall_pairwise.h"

#include "collectives/pairwise_rounds.h"

namespace ibdt::collectives {

Result<std::unique_ptr<PlanImpl>> makePairwiseAlltoall(Communicator& comm, const AlltoallArgs& args,
                                                       int64_t throttle) {
  PairwiseLayout layout{args.sendtype, args.recvtype, {}};
  for (int peer = 0; peer < comm.size(); ++peer) {
    layout.peers.push_back({args.sendBlock(peer), args.sendcount, args.recvBlock(peer), args.recvcount});
  }
  IBDT_ASSIGN_OR_RETURN(auto rounds,
                        PairwiseRounds::create(comm, std::move(layout), throttle, "alltoall (pairwise)", "pairwise"));
  return std::unique_ptr<PlanImpl>(std::move(rounds));
}

}  // namespace ibdt::collectives
