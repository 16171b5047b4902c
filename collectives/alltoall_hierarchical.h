// collectives/alltoall_hierarchical.h — node-aware alltoall (Jocksch,
// Kraushaar and Daverio, Section II-A and Figure 1).
#pragma once

#include <memory>

#include "collectives/alltoall_args.h"
#include "collectives/plan_impl.h"

namespace ibdt::collectives {

// Gather at up to `leaders` ranks per node, direct exchange between the
// leaders of different nodes, scatter on the node. Collective at init: the
// ranks compare their arguments (an allgather of whether checkAlltoallArgs()
// accepted them, the type signature and `leaders`), so bad arguments or a
// mismatch on any rank fail init on every rank.
Result<std::unique_ptr<PlanImpl>> makeHierarchicalAlltoall(Communicator& comm, const Result<AlltoallArgs>& args,
                                                           int leaders);

}  // namespace ibdt::collectives
