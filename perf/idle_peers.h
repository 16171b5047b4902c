// perf/idle_peers.h — `ibdt-bench connect --idle-peers N,...`
// (perf/idle_peers_bench.cc): ping-pong of two ranks among N connected
// ones, and the eager memory an all-to-all touches per rank.
#pragma once

#include <string>
#include <vector>

#include "perf/report.h"

namespace ibdt::perf {

struct IdlePeersOptions {
  std::vector<int> ranks;  // job sizes, each >= 2
  std::string provider = "auto";
  int rounds = 1;  // all-to-all rounds before the memory is read
  std::string jobTag;  // set per job size
};

void runIdlePeers(const CommonOptions& common, IdlePeersOptions options);

}  // namespace ibdt::perf
