// collectives/alltoall_hierarchical.h — node-aware alltoall (Jocksch,
// Kraushaar and Daverio, Section II-A and Figure 1).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "collectives/alltoall_args.h"
#include "collectives/plan_impl.h"

namespace ibdt::collectives {

// Gather at up to `options.leaders` ranks per node, exchange between the
// leaders of different nodes (direct or Bruck, options.leaderExchange),
// scatter on the node. Collective at init: the ranks compare their
// arguments (an allgather of whether checkAlltoallArgs() accepted them, the
// type signature, the leaders and the leader exchange), so bad arguments or
// a mismatch on any rank fail init on every rank.
Result<std::unique_ptr<PlanImpl>> makeHierarchicalAlltoall(Communicator& comm, const Result<AlltoallArgs>& args,
                                                           const AlltoallOptions& options);

// Where a rank's alltoall happens: its group (equal on the group's ranks,
// unique among groups) and its index and the group's size; blocks are
// addressed by index within the group.
struct GroupPlace {
  int64_t group = 0, rank = 0, size = 1;
};
// Every communicator rank's group and index in it.
struct RankGroups {
  std::vector<int> group, rank;
};

// The simultaneous alltoalls of groups that partition `comm` (one group:
// the plain hierarchical alltoall), merged node by node (Jocksch II-C):
// the gather, exchange and scatter above carry only pairs of one group.
// Collective over `comm`; every rank's blocks must have one signature.
Result<std::unique_ptr<PlanImpl>> makeNodeMergedAlltoall(Communicator& comm, const Result<AlltoallArgs>& args,
                                                         const AlltoallOptions& options, const GroupPlace& place,
                                                         std::string name);

// What every rank agreed on at init (alltoall_hierarchical_agreement.cc).
struct HierarchicalAgreement {
  RankGroups groups;
  LeaderExchange exchange = LeaderExchange::kDirect;  // resolved: direct or Bruck
  bool oneSided = false;  // the relay: one-sided writes, no leader exchange (not with a forced Bruck)
};
// The allgather that checks every rank's arguments against the others'
// (kInvalidArgument naming the rank and what differs, on every rank) and
// resolves kAuto by rank 0's cost model.
Result<HierarchicalAgreement> agreeOnHierarchical(Communicator& comm, const Result<AlltoallArgs>& args,
                                                  const AlltoallOptions& options, const GroupPlace& place,
                                                  const std::string& name);

}  // namespace ibdt::collectives
