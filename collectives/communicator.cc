// Communicator: ranks of one messaging Context, mapped to Context ranks,
// with a context id of their own and the node map; split() and
// splitByNode() derive communicators from it.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <set>

#include "base/config.h"
#include "base/log.h"
#include "ibdt/collectives.h"
#include "collectives/alltoallv_mailbox_calls.h"
#include "ibdt/store.h"

namespace ibdt::collectives {

// Context ids of a root communicator's family at this rank: the root's, and
// the next one a split may take (every split agrees on the highest `next`
// of its members, so a child's id is above every id any member has used).
struct Communicator::IdFamily {
  uint32_t root;
  uint32_t next;
};

Communicator::Communicator(messaging::Context& context, std::vector<int> contextRanks, std::vector<NodeInfo> nodes,
                           uint32_t contextId, std::shared_ptr<IdFamily> family)
    : context_(&context), contextRanks_(std::move(contextRanks)), nodes_(std::move(nodes)), contextId_(contextId),
      family_(std::move(family)) {
  rank_ = static_cast<int>(std::find(contextRanks_.begin(), contextRanks_.end(), context.rank()) -
                           contextRanks_.begin());
  std::set<int> distinct;
  for (const NodeInfo& node : nodes_) distinct.insert(node.nodeId);
  nodeCount_ = static_cast<int>(distinct.size());
  const int mine = nodes_[static_cast<size_t>(rank_)].nodeId;
  localSize_ = static_cast<int>(
      std::count_if(nodes_.begin(), nodes_.end(), [mine](const NodeInfo& node) { return node.nodeId == mine; }));
  // A garbage IBDT_STATS already failed the Context's creation (its pools
  // read it first), so here it is 0 or 1.
  const Result<bool> stats = config::getBool("IBDT_STATS");
  printStats_ = stats.isOk() && *stats;
}

Communicator::~Communicator() {
  if (printStats_ && !counts_.empty()) {
    log::write(log::Level::kInfo, strCat("collectives (communicator ", contextId_, ", rank ", rank_, " of ", size(),
                                         "): ", describe(counts_)));
  }
}

void Communicator::countAlgorithm(std::string_view collective, std::string_view algorithm, bool chosenByAuto) {
  auto byCollective = counts_.try_emplace(std::string(collective)).first;
  AlgorithmCount& count = byCollective->second.try_emplace(std::string(algorithm)).first->second;
  ++count.plans;
  if (chosenByAuto) ++count.chosenByAuto;
}

std::string describe(const AlgorithmCounts& counts) {
  std::string text;
  for (const auto& [collective, algorithms] : counts) {
    text += text.empty() ? "" : "; ";
    text += collective + ":";
    const char* separator = " ";
    for (const auto& [algorithm, count] : algorithms) {
      text += strCat(separator, algorithm, " ", count.plans, " (auto ", count.chosenByAuto, ")");
      separator = ", ";
    }
  }
  return text;
}

Result<std::unique_ptr<Communicator>> Communicator::create(messaging::Context& context, std::vector<NodeInfo> nodeMap,
                                                           uint32_t contextId) {
  if (contextId < kFirstExchangeCommunicator || contextId > UINT32_MAX - kMaxSplitIds) {
    return makeError(Code::kInvalidArgument, "communicator: context id ", contextId, " is outside [",
                     kFirstExchangeCommunicator, ", ", UINT32_MAX - kMaxSplitIds,
                     "] (below: the range user point-to-point messages use; above: no room for splits)");
  }
  const size_t size = static_cast<size_t>(context.size());
  if (nodeMap.empty()) {
    for (size_t r = 0; r < size; ++r) nodeMap.push_back({0, static_cast<int>(r)});
  }
  if (nodeMap.size() != size) {
    return makeError(Code::kInvalidArgument, "communicator: the node map has ", nodeMap.size(),
                     " entries for ", size, " ranks");
  }
  for (size_t r = 0; r < size; ++r) {
    if (nodeMap[r].nodeId < 0 || nodeMap[r].localRank < 0) {
      return makeError(Code::kInvalidArgument, "communicator: rank ", r, " has node id ", nodeMap[r].nodeId,
                       " and local rank ", nodeMap[r].localRank, " (both must be >= 0)");
    }
  }
  std::vector<int> contextRanks(size);
  std::iota(contextRanks.begin(), contextRanks.end(), 0);
  auto family = std::make_shared<IdFamily>(IdFamily{contextId, contextId + 1});
  return std::unique_ptr<Communicator>(
      new Communicator(context, std::move(contextRanks), std::move(nodeMap), contextId, std::move(family)));
}

Result<std::unique_ptr<Communicator>> Communicator::create(messaging::Context& context, bootstrap::Store& store,
                                                           Deadline deadline, uint32_t contextId) {
  if (store.size() != context.size() || store.rank() != context.rank()) {
    return makeError(Code::kInvalidArgument, "communicator: the store's job (rank ", store.rank(), " of ",
                     store.size(), ") is not the context's (rank ", context.rank(), " of ", context.size(), ")");
  }
  const int32_t mine[2] = {store.nodeId(), store.localRank()};
  uint8_t bytes[sizeof mine];
  std::memcpy(bytes, mine, sizeof mine);
  IBDT_ASSIGN_OR_RETURN(std::vector<bootstrap::Bytes> all, store.allgather(bytes, deadline));
  std::vector<NodeInfo> nodes;
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].size() != sizeof mine) {
      return makeError(Code::kProtocol, "communicator: rank ", r, " sent a ", all[r].size(),
                       "-byte placement, expected ", sizeof mine);
    }
    int32_t placement[2];
    std::memcpy(placement, all[r].data(), sizeof placement);
    nodes.push_back({placement[0], placement[1]});
  }
  return create(context, std::move(nodes), contextId);
}

namespace {

// The members' node entries, local ranks renumbered in member order.
std::vector<NodeInfo> memberNodes(const Communicator& parent, const std::vector<int>& members) {
  std::vector<NodeInfo> nodes;
  for (int member : members) {
    const int nodeId = parent.node(member).nodeId;
    const int local = static_cast<int>(
        std::count_if(nodes.begin(), nodes.end(), [nodeId](const NodeInfo& n) { return n.nodeId == nodeId; }));
    nodes.push_back({nodeId, local});
  }
  return nodes;
}

}  // namespace

Result<std::unique_ptr<Communicator>> Communicator::split(int colour, int key, Deadline deadline) {
  if (colour < kUndefinedColour) {
    return makeError(Code::kInvalidArgument, "communicator split: colour ", colour,
                     " (>= 0, or kUndefinedColour to join none)");
  }
  const int64_t mine[3] = {colour, key, family_->next};
  std::vector<int64_t> all(static_cast<size_t>(3 * size()));
  IBDT_RETURN_IF_ERROR(allgather(*this, mine, 3, all.data(), deadline));
  int64_t next = 0;
  for (int r = 0; r < size(); ++r) next = std::max(next, all[static_cast<size_t>(3 * r + 2)]);
  if (next - family_->root >= kMaxSplitIds) {  // every member sees the same and fails alike
    return makeError(Code::kResource, "communicator split: the ", kMaxSplitIds, " context ids above ", family_->root,
                     " are used up");
  }
  family_->next = static_cast<uint32_t>(next) + 1;
  if (colour == kUndefinedColour) return std::unique_ptr<Communicator>();
  std::vector<int> members;
  for (int r = 0; r < size(); ++r) {
    if (all[static_cast<size_t>(3 * r)] == colour) members.push_back(r);
  }
  std::stable_sort(members.begin(), members.end(), [&all](int a, int b) {
    return all[static_cast<size_t>(3 * a + 1)] < all[static_cast<size_t>(3 * b + 1)];
  });
  std::vector<int> contextRanks;
  for (int member : members) contextRanks.push_back(contextRank(member));
  return std::unique_ptr<Communicator>(new Communicator(*context_, std::move(contextRanks), memberNodes(*this, members),
                                                        static_cast<uint32_t>(next), family_));
}

Result<NodeSplit> Communicator::splitByNode(int leadersPerNode, Deadline deadline) {
  if (leadersPerNode < 1) {
    return makeError(Code::kInvalidArgument, "communicator splitByNode: ", leadersPerNode,
                     " leaders per node (at least 1)");
  }
  // Membership follows from the node map every rank holds; only the ids
  // need agreeing: the node communicators take `next`, the leaders next + 1.
  const int64_t mine = family_->next;
  int64_t next = 0;
  IBDT_RETURN_IF_ERROR(allreduce(*this, &mine, &next, 1, ReduceOp::kMax, deadline));
  if (next + 1 - family_->root >= kMaxSplitIds) {
    return makeError(Code::kResource, "communicator splitByNode: the ", kMaxSplitIds, " context ids above ",
                     family_->root, " are used up");
  }
  family_->next = static_cast<uint32_t>(next) + 2;
  std::vector<int> local, leaders;
  for (int r = 0; r < size(); ++r) {
    if (node(r).nodeId == node(rank_).nodeId) local.push_back(r);
    if (node(r).localRank < leadersPerNode) leaders.push_back(r);
  }
  auto make = [&](const std::vector<int>& members, int64_t id) {
    std::vector<int> contextRanks;
    for (int member : members) contextRanks.push_back(contextRank(member));
    return std::unique_ptr<Communicator>(new Communicator(*context_, std::move(contextRanks),
                                                          memberNodes(*this, members), static_cast<uint32_t>(id),
                                                          family_));
  };
  NodeSplit split;
  split.node = make(local, next);
  if (node(rank_).localRank < leadersPerNode) split.leaders = make(leaders, next + 1);
  return split;
}

int32_t Communicator::takePlanTag() {
  if (pinnedTag_ >= 0) return pinnedTag_;
  const int32_t tag = nextTag_;
  nextTag_ = nextTag_ + 1 == kFirstReservedPlanTag ? 0 : nextTag_ + 1;  // kAnyTag (-1) is never used
  return tag;
}

}  // namespace ibdt::collectives
