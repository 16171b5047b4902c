// collectives/alltoall_pairwise.h — direct (pairwise) alltoall.
#pragma once

#include <memory>

#include "collectives/alltoall_args.h"
#include "collectives/plan_impl.h"

namespace ibdt::collectives {

// Round r (1 <= r < p) sends to rank + r and receives from rank - r (mod p),
// at most `throttle` rounds in flight (0: all); round 0, this rank's own
// block, is a typed copy. `args` were checked by checkAlltoallArgs().
Result<std::unique_ptr<PlanImpl>> makePairwiseAlltoall(Communicator& comm, const AlltoallArgs& args,
                                                       int64_t throttle);

}  // namespace ibdt::collectives
