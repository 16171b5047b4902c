// collectives/alltoall_schedule.h — the messages each all-to-all algorithm
// sends, as data: for one rank, the rounds of (peer, bytes) sends and
// receives that its plan posts (docs/simulator.md).
//
// One source for three users: the plans' builders share bruckBlocks() with
// it, alltoall_select.cc prices the α-β model from its message counts and
// bytes (alltoallVolume), and ibdt-sim (tools/) replays it message by
// message in SimGrid. Pure functions: no communicator, no buffers.
#pragma once

#include <cstdint>
#include <vector>

#include "ibdt/collectives.h"
#include "ibdt/status.h"

namespace ibdt::collectives {

// The relative indices j in [1, size) whose base-`radix` digit of weight
// `weight` is `digit` (the blocks that move in that Bruck round's message).
std::vector<int> bruckBlocks(int size, int64_t radix, int64_t weight, int64_t digit);

struct ScheduledMessage {
  int peer = 0;       // communicator rank
  int64_t bytes = 0;  // packed bytes (0: an empty message, still sent)
  bool operator==(const ScheduledMessage&) const = default;
};

// The messages of one round (a Bruck round, a pairwise step, a stage of the
// hierarchical plan): all in flight at once; the round completes when every
// send left and every receive arrived.
struct ScheduleRound {
  std::vector<ScheduledMessage> sends, recvs;
};

struct AlltoallSchedule {
  std::vector<ScheduleRound> rounds;
  // Rounds in flight at once: pairwise's throttle (0: all), else 1 (the
  // next round needs the blocks the previous one delivered).
  int64_t window = 1;
};

// What a schedule depends on besides the algorithm.
struct ScheduleShape {
  int ranks = 1;
  int rank = 0;
  int64_t blockBytes = 0;
  int64_t radix = 2;     // kBruckRadix
  int64_t throttle = 0;  // kPairwise: rounds in flight; kHierarchical: node pairs per leader (0: unlimited)
  int ranksPerNode = 1;  // kHierarchical: rank r is on node r / ranksPerNode
  int leaders = 1;       // kHierarchical: leaders per node
  bool relay = false;    // kHierarchical: its one-sided form, the relay (where a chunk takes the rendezvous)
};

// The hierarchical alltoall's direct leader exchange (the plan and its
// schedule): ceil((nodes - 1) / throttle) windows (1 when throttle is 0),
// and the window, from 1, of the node pair `distance` = (n - node) mod N
// apart (the same on every leader, which keeps the windows deadlock-free).
int leaderExchangeWindows(int nodes, int64_t throttle);
int leaderExchangeWindow(int distance, int64_t throttle);

// The rounds `shape.rank` runs. kBruckBasic/Modified/ZeroCopy are radix 2;
// kAuto is not an algorithm (kInvalidArgument), nor are out-of-range shapes.
Result<AlltoallSchedule> alltoallSchedule(AlltoallAlgorithm algorithm, const ScheduleShape& shape);

// The totals of a schedule's sends (for the α-β model) and receives.
struct ScheduleTotals {
  int64_t sentMessages = 0, sentBytes = 0, recvMessages = 0, recvBytes = 0;
  bool operator==(const ScheduleTotals&) const = default;
};
ScheduleTotals scheduleTotals(const AlltoallSchedule& schedule);

}  // namespace ibdt::collectives
