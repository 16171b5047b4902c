// Communicator: the job's ranks over one messaging Context, with a context
// id of their own and the node map.
#include <cstdint>
#include <cstring>
#include <set>

#include "ibdt/collectives.h"
#include "ibdt/store.h"

namespace ibdt::collectives {

Communicator::Communicator(messaging::Context& context, std::vector<NodeInfo> nodes, uint32_t contextId)
    : context_(&context), nodes_(std::move(nodes)), contextId_(contextId) {
  std::set<int> distinct;
  for (const NodeInfo& node : nodes_) distinct.insert(node.nodeId);
  nodeCount_ = static_cast<int>(distinct.size());
  const int mine = nodes_[static_cast<size_t>(context.rank())].nodeId;
  localSize_ = 0;
  for (const NodeInfo& node : nodes_) localSize_ += node.nodeId == mine ? 1 : 0;
}

Result<std::unique_ptr<Communicator>> Communicator::create(messaging::Context& context, std::vector<NodeInfo> nodeMap,
                                                           uint32_t contextId) {
  if (contextId < kFirstCollectiveContextId) {
    return makeError(Code::kInvalidArgument, "communicator: context id ", contextId,
                     " is below kFirstCollectiveContextId (", kFirstCollectiveContextId,
                     "), the range user point-to-point messages use");
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
  return std::unique_ptr<Communicator>(new Communicator(context, std::move(nodeMap), contextId));
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

int32_t Communicator::takePlanTag() {
  const int32_t tag = nextTag_;
  nextTag_ = nextTag_ == INT32_MAX ? 0 : nextTag_ + 1;  // kAnyTag (-1) is never used
  return tag;
}

}  // namespace ibdt::collectives
