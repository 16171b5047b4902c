// perf/simulated_nodes.h — the node map of forked ranks on simulated nodes,
// shared by `ibdt-bench alltoall --nodes K` and ibdt-tune's alltoall timings
// (which time the hierarchical alltoall on collectives::kTunedNodes nodes).
#pragma once

#include <algorithm>
#include <vector>

#include "bootstrap/node_map.h"
#include "ibdt/collectives.h"

namespace ibdt::perf {

// Rank r's node: ranks in blocks over `nodes` simulated nodes, as ibdt-run
// --nodes (lower nodes take the extra ranks). Empty (one node) for nodes <= 1.
inline std::vector<collectives::NodeInfo> simulatedNodes(int size, int nodes) {
  std::vector<collectives::NodeInfo> map;
  if (nodes <= 1) return map;
  std::vector<int> local(static_cast<size_t>(nodes), 0);
  for (int node : bootstrap::blockNodeMap(size, std::min(size, nodes))) {
    map.push_back({node, local[static_cast<size_t>(node)]++});
  }
  return map;
}

}  // namespace ibdt::perf
