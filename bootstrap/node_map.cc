#include "bootstrap/node_map.h"

#include <algorithm>

namespace ibdt::bootstrap {

std::vector<int> blockNodeMap(int size, int numNodes) {
  std::vector<int> nodeOf;
  nodeOf.reserve(static_cast<size_t>(size));
  int base = size / numNodes;
  int extra = size % numNodes;
  for (int node = 0; node < numNodes; ++node) {
    int count = base + (node < extra ? 1 : 0);
    nodeOf.insert(nodeOf.end(), static_cast<size_t>(count), node);
  }
  return nodeOf;
}

Placement placementFromNodeMap(const std::vector<int>& nodeOfRank, int rank) {
  Placement placement;
  placement.rank = rank;
  placement.size = static_cast<int>(nodeOfRank.size());
  placement.nodeId = nodeOfRank[static_cast<size_t>(rank)];
  placement.numNodes = nodeOfRank.empty() ? 1 : *std::max_element(nodeOfRank.begin(), nodeOfRank.end()) + 1;
  placement.localRank = 0;
  placement.localSize = 0;
  for (int peer = 0; peer < placement.size; ++peer) {
    if (nodeOfRank[static_cast<size_t>(peer)] != placement.nodeId) continue;
    if (peer < rank) ++placement.localRank;
    ++placement.localSize;
  }
  return placement;
}

}  // namespace ibdt::bootstrap
