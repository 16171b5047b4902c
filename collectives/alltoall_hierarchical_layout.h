// collectives/alltoall_hierarchical_layout.h — the hierarchical alltoall's
// node layout and the runs its messages are typed over
// (collectives/alltoall_hierarchical.cc).
#pragma once

#include <algorithm>
#include <map>
#include <vector>

#include "collectives/alltoall_args.h"
#include "ibdt/collectives.h"
#include "ibdt/datatype.h"

namespace ibdt::collectives::hierarchical {

// The communicator's nodes, dense in node-id order, and their ranks.
struct NodeLayout {
  std::vector<std::vector<int>> ranks;  // ranks[n]: communicator ranks on node n, in rank order
  std::vector<int> leaders;             // leaders[n]: how many leaders node n has
  std::vector<int> nodeOf;              // nodeOf[r]: the node of communicator rank r
  int myNode = 0, myLocal = 0;

  NodeLayout(const Communicator& comm, int leadersPerNode) {
    std::map<int, int> dense;
    for (int r = 0; r < comm.size(); ++r) dense.emplace(comm.node(r).nodeId, 0);
    int next = 0;
    for (auto& [id, index] : dense) index = next++;
    ranks.resize(dense.size());
    for (int r = 0; r < comm.size(); ++r) {
      std::vector<int>& node = ranks[static_cast<size_t>(dense[comm.node(r).nodeId])];
      if (r == comm.rank()) {
        myNode = dense[comm.node(r).nodeId];
        myLocal = static_cast<int>(node.size());
      }
      node.push_back(r);
      nodeOf.push_back(dense[comm.node(r).nodeId]);
    }
    for (const auto& node : ranks) leaders.push_back(std::min(leadersPerNode, static_cast<int>(node.size())));
  }
  int nodes() const { return static_cast<int>(ranks.size()); }
  // Leader index (local rank) on `node` that handles partner node `other`.
  int handler(int node, int other) const { return other % leaders[static_cast<size_t>(node)]; }
  int leaderRank(int node, int index) const { return ranks[static_cast<size_t>(node)][static_cast<size_t>(index)]; }
  // The nodes leader `index` of `node` handles, ascending.
  std::vector<int> handled(int node, int index) const {
    std::vector<int> out;
    for (int n = 0; n < nodes(); ++n) {
      if (handler(node, n) == index) out.push_back(n);
    }
    return out;
  }
};

// A message as count x type over packed bytes: the listed (offset, length)
// runs of a buffer, in order (no run: an empty message).
struct Message {
  datatype::Datatype type = datatype::Datatype::basic(datatype::BasicKind::kByte);
  int64_t count = 0;
  int64_t offset = 0;  // from the base the type is over
};
struct Runs {
  std::vector<int64_t> lengths, offsets;
  void add(int64_t offset, int64_t length) {
    if (length == 0) return;
    if (!offsets.empty() && offsets.back() + lengths.back() == offset) {
      lengths.back() += length;  // adjacent: one run
      return;
    }
    offsets.push_back(offset);
    lengths.push_back(length);
  }
  bool single() const { return offsets.size() == 1; }
  Result<Message> message() const {
    if (offsets.empty()) return Message{};
    IBDT_ASSIGN_OR_RETURN(
        datatype::Datatype type,
        datatype::Datatype::hindexed(lengths, offsets, datatype::Datatype::basic(datatype::BasicKind::kByte)));
    IBDT_RETURN_IF_ERROR(type.commit());
    return Message{type, 1, 0};
  }
};

}  // namespace ibdt::collectives::hierarchical
