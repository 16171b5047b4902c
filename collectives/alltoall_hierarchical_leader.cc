// The hierarchical alltoall's part on a leader (two-sided): G and E laid
// out per node pair (node-major), the
// gather's receives, the exchange between leaders (direct by windows, or
// the leaders' Bruck as a sub-plan) and the scatter's sends; see
// collectives/alltoall_hierarchical.cc.
#include <algorithm>

#include "base/checked_math.h"
#include "collectives/alltoall_hierarchical_builder.h"
#include "collectives/alltoallv_algorithms.h"

namespace ibdt::collectives::hierarchical {

// Leader j: the node-blocks' places, then gather (stage 0 receives),
// exchange, scatter.
Status MergedBuilder::buildLeader(std::unique_ptr<Communicator> leaders) {
  const int node = layout_.myNode, j = layout_.myLocal;
  const size_t m = locals().size();
  int64_t out = 0, in = 0;
  for (int n : layout_.handled(node, j)) {
    NodeBlock nb;
    nb.node = n;
    nb.outOffset = out;
    for (int s : locals()) {
      nb.outAt.push_back(out + nb.outBlocks);
      nb.outCount.push_back(static_cast<int64_t>(partnersOn(n, s).size()));
      nb.outBlocks += nb.outCount.back();
    }
    for (int source : layout_.ranks[static_cast<size_t>(n)]) {  // n's order: source, then destination
      for (int d : locals()) nb.inIndex.push_back(together(source, d) ? nb.inBlocks++ : -1);
    }
    out += nb.outBlocks;
    in += nb.inBlocks;
    nodeBlocks_.push_back(std::move(nb));
  }
  // Node-major: a node-block is one run of G and of E.
  auto aliased = [&](const NodeBlock& nb) { return nb.node == node && !bruck_; };  // E's block is G's
  for (const NodeBlock& nb : nodeBlocks_) in -= aliased(nb) ? nb.inBlocks : 0;
  Checked checked;
  const int64_t bytes = checked.mul(checked.add(out, in), block_);
  if (checked.overflow) return makeError(Code::kOverflow, name_, ": leader buffer size overflows");
  gather_ = plan_->scratch(static_cast<size_t>(bytes));  // G, then E: one base for every type over them
  exchanged_ = gather_ + out * block_;
  std::byte* exchanged = exchanged_;
  for (NodeBlock& nb : nodeBlocks_) {
    nb.in = aliased(nb) ? gather_ + nb.outOffset * block_ : exchanged;
    if (!aliased(nb)) exchanged += nb.inBlocks * block_;
  }
  for (size_t s = 0; s < m; ++s) {
    if (static_cast<int>(s) == j) continue;
    Runs chunk, row;
    for (const NodeBlock& nb : nodeBlocks_) {
      chunk.add(nb.outAt[s] * block_, nb.outCount[s] * block_);
      for (int source : partnersOn(nb.node, locals()[s])) row.add(inSlot(nb, source, s) - gather_, block_);
    }
    IBDT_ASSIGN_OR_RETURN(Message gathered, chunk.message());
    IBDT_ASSIGN_OR_RETURN(Message scattered, row.message());
    IBDT_RETURN_IF_ERROR(plan_->addRecv(0, gather_, gathered.count, gathered.type, locals()[s], gatherTag_));
    IBDT_RETURN_IF_ERROR(
        plan_->addSend(scatterStage(), gather_, scattered.count, scattered.type, locals()[s], scatterTag_));
  }
  return bruck_ ? buildBruckExchange(std::move(leaders)) : buildDirectExchange();
}

// One message per node-block with each partner leader, in windows by distance.
Status MergedBuilder::buildDirectExchange() {
  const int node = layout_.myNode, nodes = layout_.nodes();
  for (const NodeBlock& nb : nodeBlocks_) {
    if (nb.node == node) continue;  // stays: E's block is G's
    const int partner = layout_.leaderRank(nb.node, layout_.handler(nb.node, node));
    const size_t sendStage = windowStage((nb.node - node + nodes) % nodes);
    const size_t recvStage = windowStage((node - nb.node + nodes) % nodes);
    // The wire order [source][destination]: one run of G and of E.
    Runs out, in;
    for (size_t s = 0; s < locals().size(); ++s) out.add(nb.outAt[s] * block_, nb.outCount[s] * block_);
    for (size_t k = 0; k < nb.inIndex.size(); ++k) {
      if (nb.inIndex[k] >= 0) in.add(nb.in - gather_ + nb.inIndex[k] * block_, block_);
    }
    IBDT_ASSIGN_OR_RETURN(Message sent, bytesOrRuns(out));
    IBDT_ASSIGN_OR_RETURN(Message received, bytesOrRuns(in));
    IBDT_RETURN_IF_ERROR(
        plan_->addSend(sendStage, gather_ + sent.offset, sent.count, sent.type, partner, exchangeTag_));
    IBDT_RETURN_IF_ERROR(
        plan_->addRecv(recvStage, gather_ + received.offset, received.count, received.type, partner, exchangeTag_));
  }
  return Status::ok();
}

// The leaders' zero-copy Bruck alltoallv of the node-blocks (one leader
// per node: the leaders' communicator rank is the node's index).
Status MergedBuilder::buildBruckExchange(std::unique_ptr<Communicator> leaders) {
  Communicator& across = plan_->keep(std::move(leaders));
  const size_t nodes = nodeBlocks_.size();
  std::vector<int64_t> sendcounts(nodes), sdispls(nodes), recvcounts(nodes), rdispls(nodes);
  for (size_t n = 0; n < nodes; ++n) {
    const NodeBlock& nb = nodeBlocks_[n];
    sendcounts[n] = nb.outBlocks * block_;
    sdispls[n] = nb.outOffset * block_;
    recvcounts[n] = nb.inBlocks * block_;
    rdispls[n] = nb.in - exchanged_;  // not aliased with Bruck
  }
  IBDT_ASSIGN_OR_RETURN(AlltoallvArgs args, checkAlltoallvArgs(across, gather_, sendcounts, sdispls, byte(), exchanged_,
                                                               recvcounts, rdispls, byte()));
  IBDT_ASSIGN_OR_RETURN(auto bruck, buildZeroCopyBruckAlltoallv(across, args, datatype::BasicKind::kByte));
  plan_->addSubPlan(1, std::move(bruck));
  return Status::ok();
}

}  // namespace ibdt::collectives::hierarchical
