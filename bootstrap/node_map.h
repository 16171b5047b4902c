// bootstrap/node_map.h — node ids of every rank, and what follows from them
// (local rank, local size, node count). Shared by ibdt-run's simulated node
// map and the PMI-1 backend's decoded PMI_process_mapping.
#pragma once

#include <vector>

#include "ibdt/store.h"

namespace ibdt::bootstrap {

// Block distribution of `size` ranks over `numNodes` nodes, as even as
// possible, lower nodes taking the extra ranks: 5 over 2 -> {0,0,0,1,1}.
std::vector<int> blockNodeMap(int size, int numNodes);
// The placement of `rank` given every rank's node id (ids dense from 0).
Placement placementFromNodeMap(const std::vector<int>& nodeOfRank, int rank);

}  // namespace ibdt::bootstrap
