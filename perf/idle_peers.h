// perf/idle_peers.h — `ibdt-bench connect --idle-peers N,...`
// (perf/idle_peers_bench.cc): ping-pong of two ranks among N connected
// ones, and the eager memory an all-to-all touches per rank.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "ibdt/messaging.h"
#include "perf/report.h"

namespace ibdt::perf {

struct IdlePeersOptions {
  std::vector<int> ranks;  // job sizes, each >= 2
  std::string provider = "auto";
  int rounds = 1;  // all-to-all rounds before the memory is read
  int64_t pingPongBytes = 8;  // each way, a multiple of 8
  std::string jobTag;  // set per job size
};

void runIdlePeers(const CommonOptions& common, IdlePeersOptions options);

// One 8-byte round trip between ranks 0 and 1 (rank 0 starts); checks the
// value that comes back. Shared by the connect and idle-peers benchmarks.
Status pingPong8(messaging::Context& context, int rank, int64_t round);
// The same with `out.size()` words each way (every word checked).
Status pingPong(messaging::Context& context, int rank, int64_t round, std::span<int64_t> out, std::span<int64_t> in);

}  // namespace ibdt::perf
