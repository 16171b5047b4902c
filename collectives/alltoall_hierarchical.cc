// Hierarchical alltoall (Jocksch, Kraushaar and Daverio, II-A, Figure 1,
// and II-B) and multiple alltoall (II-C): the blocks that go from one node
// to another travel as one node-block between two leaders, so p^2 small
// messages become N^2 larger ones (N nodes) plus node-local gathers and
// scatters. The multiple alltoall runs the alltoalls of several groups (the
// rows of a process grid) at once: only pairs of one group exchange, and a
// node-block carries the blocks of every group.
//
// Leaders: the first min(L, ranks on the node) local ranks (L from
// AlltoallOptions::leaders). Leader j of a node handles the nodes n with
// n mod L_node == j, both as destinations (it sends them this node's
// blocks) and as sources (it receives their blocks for this node), so the
// partner of a node pair is fixed on both sides, as in Figure 1.
//
// A leader's buffers: G holds, for each node n it handles, the node-block
// [local source][its partners on n] it sends n, contiguous; E holds the
// node-block [source on n][local destination] n sends it, in n's order.
//
// Stages (collectives/staged_plan.h; every receive is posted at start):
//   0       every rank packs its send blocks, one chunk per leader, in the
//           order [destination node][destination rank], and sends each
//           leader its chunk; the leader's receive type spreads the chunk
//           over G's node-blocks (its own chunk it packs straight into G);
//   1 .. W  the exchange. Direct: each node-block is one message to the
//           partner leader, window w (distance (n - node) mod N in
//           ((w-1)t, wt], t the throttle) sent once the receives of window
//           w - 1 arrived, so at most t node pairs per leader are in flight
//           and no leader waits on a later window (the windows follow the
//           distance on every leader). The own node's block is E in place.
//           Bruck (one leader per node, W = 1): the zero-copy Bruck
//           alltoallv of collectives/alltoallv_bruck.cc among the leaders,
//           G's node-blocks to E's, ceil(log2 N) rounds;
//   W + 1   the leader sends each rank of its node its row [node][source],
//           an hindexed type over E;
//   W + 2   every rank unpacks its rows into its receive buffer.
// A rank's chunk and its row at a leader hold the same ranks (the group's
// ranks on that leader's nodes), so both have one offset per rank.
//
// In place (kInPlace): every block is packed out of the receive buffer in
// stage 0, before any stage unpacks into it, so in place needs no memory
// beyond the staging every run has (docs/alltoall-hierarchical.md).
// Node-local hops go through the messaging layer (collectives do not reach
// below it). Where a chunk would take the rendezvous (the agreement's
// vote) the plan is the relay instead (alltoall_hierarchical_relay.cc):
// one-sided writes, a block for the own node straight into its receive
// buffer, one for another node into a leader's G and from there, one
// write per remote destination, into that destination's receive buffer.
// Messages carry packed bytes; the ranks' type signatures are
// compared once at init (alltoall_hierarchical_agreement.cc), where the
// other algorithms compare them per message.
#include "collectives/alltoall_hierarchical.h"

#include "base/checked_math.h"
#include "collectives/alltoall_hierarchical_builder.h"

namespace ibdt::collectives {
namespace hierarchical {

using datatype::Segment;

Result<std::unique_ptr<PlanImpl>> MergedBuilder::build() {
  IBDT_ASSIGN_OR_RETURN(Segment send, Segment::create(args_.sendtype, args_.sendcount));
  IBDT_ASSIGN_OR_RETURN(Segment recv, Segment::create(args_.recvtype, args_.recvcount));
  sendSegment_ = std::move(send);
  recvSegment_ = std::move(recv);
  Checked checked;
  checked.mul(comm_.size(), block_);  // a rank's staging holds at most p blocks each way
  if (checked.overflow) return makeError(Code::kOverflow, name_, ": staging buffer size overflows");
  plan_ = std::make_unique<StagedPlan>(comm_, name_, oneSided_ ? kRelayStages : static_cast<size_t>(windows_) + 3);
  const bool leader = layout_.myLocal < layout_.leaders[static_cast<size_t>(layout_.myNode)];
  std::unique_ptr<Communicator> leaders;
  if (bruck_) {  // collective over comm: every rank takes part
    IBDT_ASSIGN_OR_RETURN(leaders, comm_.split(leader ? 0 : kUndefinedColour, layout_.myNode));
  }
  if (oneSided_) {
    IBDT_RETURN_IF_ERROR(buildRelay());
  } else {
    if (leader) IBDT_RETURN_IF_ERROR(buildLeader(std::move(leaders)));
    IBDT_RETURN_IF_ERROR(buildMember());
  }
  for (const PendingPut& put : puts_) {  // every rank's keys are out: none waits on another's putInit
    IBDT_RETURN_IF_ERROR(plan_->addPut(put.stage, put.buf, put.bytes, put.peer, put.tag));
  }
  return std::unique_ptr<PlanImpl>(std::move(plan_));
}

}  // namespace hierarchical

Result<std::unique_ptr<PlanImpl>> makeNodeMergedAlltoall(Communicator& comm, const Result<AlltoallArgs>& args,
                                                         const AlltoallOptions& options, const GroupPlace& place,
                                                         std::string name) {
  IBDT_ASSIGN_OR_RETURN(HierarchicalAgreement agreed, agreeOnHierarchical(comm, args, options, place, name));
  return hierarchical::MergedBuilder(comm, *args, options, agreed, std::move(name)).build();
}

Result<std::unique_ptr<PlanImpl>> makeHierarchicalAlltoall(Communicator& comm, const Result<AlltoallArgs>& args,
                                                           const AlltoallOptions& options) {
  return makeNodeMergedAlltoall(comm, args, options, {0, comm.rank(), comm.size()}, "hierarchical");
}

}  // namespace ibdt::collectives
