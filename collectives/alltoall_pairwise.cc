// Direct (pairwise) alltoall: the shared cyclic round driver
// (pairwise_rounds.h) over the regular blocks of MPI_Alltoall; in place, its
// paired rounds through staging slots.
#include "collectives/alltoall_pairwise.h"

#include "collectives/alltoall_rounds.h"
#include "collectives/pairwise_rounds.h"

namespace ibdt::collectives {

Result<std::unique_ptr<PlanImpl>> makePairwiseAlltoall(Communicator& comm, const AlltoallArgs& args,
                                                       int64_t throttle) {
  PairwiseLayout layout{args.sendtype, args.recvtype, {}};
  for (int peer = 0; peer < comm.size(); ++peer) {
    layout.peers.push_back({args.sendBlock(peer), args.sendcount, args.recvBlock(peer), args.recvcount});
  }
  if (args.inPlace) {
    layout.inPlace = true;
    layout.stagedBytes = args.bytes;
    layout.staged = args.recvtype;
    if (args.bytes > 0) {
      IBDT_ASSIGN_OR_RETURN(layout.staged, packedType(args.recvtype));
    }
  }
  IBDT_ASSIGN_OR_RETURN(auto rounds,
                        PairwiseRounds::create(comm, std::move(layout), throttle, "alltoall (pairwise)", "pairwise"));
  return std::unique_ptr<PlanImpl>(std::move(rounds));
}

}  // namespace ibdt::collectives
