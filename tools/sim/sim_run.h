// tools/sim/sim_run.h — replays all-to-all schedules in SimGrid
// (docs/simulator.md).
//
// One S4U actor per rank runs collectives::alltoallSchedule() of its rank
// message by message: a round's sends and receives are in flight together
// (pairwise: `window` rounds), the next round starts when the oldest one
// completed, as the plans do. Before each send the rank's core executes the
// on-node cost of the message (perMessageNs + perByteNs * bytes of the
// algorithm's fit, alltoall_select.h) and, once per call, fixedNs; the bytes
// then cross the platform's links. A rank checks every message it receives
// against its schedule (round, sender, bytes) and counts what it sent and
// received, so a test can compare the simulation with the schedule.
//
// SimGrid allows one engine per process, so simulate() runs a batch of
// cases in a forked child (one engine, one platform, the cases one after
// the other) and reads the results back through a pipe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collectives/alltoall_schedule.h"
#include "ibdt/collectives.h"
#include "ibdt/status.h"
#include "tools/sim/sim_platform.h"
#include "transport/messaging/tuning.h"

namespace ibdt::sim {

struct SimCase {
  collectives::AlltoallAlgorithm algorithm = collectives::AlltoallAlgorithm::kPairwise;
  collectives::ScheduleShape shape;  // rank is ignored; ranksPerNode also places the ranks
  messaging::CollectiveCost onNode;  // the algorithm's on-node cost
  bool counters = false;             // return every rank's counters
};

struct SimResult {
  double seconds = 0;                                // first start to last rank done
  std::vector<collectives::ScheduleTotals> ranks;    // when SimCase::counters
  std::string mismatch;  // a message that did not match the receiver's schedule (empty: none)
};

// Runs `cases` on `platform` (nodes >= ceil(p / ranksPerNode) for every case).
// `config` holds extra SimGrid settings ("name:value"), e.g. "network/crosstraffic:0".
Result<std::vector<SimResult>> simulate(const PlatformSpec& platform, const std::vector<SimCase>& cases,
                                        const std::vector<std::string>& config = {});

}  // namespace ibdt::sim
