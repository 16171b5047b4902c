// The all-to-all schedules as data (alltoall_schedule.h). Each function
// mirrors the peers and block counts its builder uses: pairwise_rounds.h,
// alltoall_bruck_basic.cc, alltoall_bruck_modified.cc (also radix r and
// zero-copy, which share its schedule) and alltoall_hierarchical.cc.
#include "collectives/alltoall_schedule.h"

#include <algorithm>
#include <set>

namespace ibdt::collectives {

std::vector<int> bruckBlocks(int size, int64_t radix, int64_t weight, int64_t digit) {
  std::vector<int> blocks;
  for (int64_t j = digit * weight; j < size; ++j) {
    if ((j / weight) % radix == digit) blocks.push_back(static_cast<int>(j));
  }
  return blocks;
}

namespace {

int wrap(int64_t rank, int size) { return static_cast<int>(((rank % size) + size) % size); }

// Round r sends to rank + r and receives from rank - r, one block each.
AlltoallSchedule pairwise(const ScheduleShape& s) {
  AlltoallSchedule schedule;
  schedule.window = s.throttle;
  for (int r = 1; r < s.ranks; ++r) {
    schedule.rounds.push_back(
        {{{wrap(s.rank + r, s.ranks), s.blockBytes}}, {{wrap(s.rank - r, s.ranks), s.blockBytes}}});
  }
  return schedule;
}

// Pairwise's messages as one round: the plan posts a write to every peer
// at once, with no rounds (its zero-byte ready and notification messages
// are control, priced in the fit's per-message term).
AlltoallSchedule directWrite(const ScheduleShape& s) {
  AlltoallSchedule schedule;
  for (const ScheduleRound& step : pairwise(s).rounds) {
    if (schedule.rounds.empty()) schedule.rounds.emplace_back();
    ScheduleRound& round = schedule.rounds.front();
    round.sends.insert(round.sends.end(), step.sends.begin(), step.sends.end());
    round.recvs.insert(round.recvs.end(), step.recvs.begin(), step.recvs.end());
  }
  return schedule;
}

// Listing 1: round k = 1, 2, 4, ... sends the blocks with bit k to rank + k.
AlltoallSchedule bruckBasic(const ScheduleShape& s) {
  AlltoallSchedule schedule;
  for (int k = 1; k < s.ranks; k <<= 1) {
    const int64_t bytes = static_cast<int64_t>(bruckBlocks(s.ranks, 2, k, 1).size()) * s.blockBytes;
    schedule.rounds.push_back({{{wrap(s.rank + k, s.ranks), bytes}}, {{wrap(s.rank - k, s.ranks), bytes}}});
  }
  return schedule;
}

// Listing 2 with radix r (and Listing 3, radix 2): per weight, digit v sends
// to rank - v*w and receives from rank + v*w.
AlltoallSchedule bruckModified(const ScheduleShape& s, int64_t radix) {
  AlltoallSchedule schedule;
  radix = std::min<int64_t>(radix, std::max(s.ranks, 2));  // r >= p: one round of p - 1 messages
  for (int64_t weight = 1; weight < s.ranks; weight *= radix) {
    ScheduleRound& round = schedule.rounds.emplace_back();
    for (int64_t digit = 1; digit < radix && digit * weight < s.ranks; ++digit) {
      const int64_t shift = digit * weight;
      const int64_t bytes = static_cast<int64_t>(bruckBlocks(s.ranks, radix, weight, digit).size()) * s.blockBytes;
      round.sends.push_back({wrap(s.rank - shift, s.ranks), bytes});
      round.recvs.push_back({wrap(s.rank + shift, s.ranks), bytes});
    }
    if (weight > s.ranks / radix) break;  // the next weight would reach p (and must not overflow)
  }
  return schedule;
}

// Nodes of `perNode` consecutive ranks (the last may be smaller), with
// min(leaders, node size) leaders each, as NodeLayout in alltoall_hierarchical.cc.
struct Nodes {
  int ranks, perNode, leadersWanted;
  int count() const { return (ranks + perNode - 1) / perNode; }
  int size(int node) const { return std::min(perNode, ranks - node * perNode); }
  int leaders(int node) const { return std::min(leadersWanted, size(node)); }
  int leaderRank(int node, int index) const { return node * perNode + index; }
  // Blocks a rank of `node` exchanges through its leader `index`: those of
  // the nodes that leader handles (n mod leaders == index).
  int64_t blocksVia(int node, int index) const {
    int64_t blocks = 0;
    for (int n = index; n < count(); n += leaders(node)) blocks += size(n);
    return blocks;
  }
};

}  // namespace

int leaderExchangeWindows(int nodes, int64_t throttle) {
  if (throttle <= 0 || nodes <= 1) return 1;
  return static_cast<int>((nodes - 1 + throttle - 1) / throttle);
}

int leaderExchangeWindow(int distance, int64_t throttle) {
  return throttle > 0 ? 1 + static_cast<int>((distance - 1) / throttle) : 1;
}

namespace {

// Gather at the leaders (round 0), leaders exchange directly (rounds 1 ..
// W: the node pairs at distance d = (n - node) mod N in window ceil(d / t),
// t the throttle, 0: one window), scatter (W + 1).
AlltoallSchedule hierarchical(const ScheduleShape& s) {
  const Nodes nodes{s.ranks, s.ranksPerNode, s.leaders};
  const int node = s.rank / s.ranksPerNode, local = s.rank % s.ranksPerNode;
  const int leaders = nodes.leaders(node);
  auto window = [&](int distance) { return static_cast<size_t>(leaderExchangeWindow(distance, s.throttle)); };
  AlltoallSchedule schedule;
  schedule.rounds.resize(static_cast<size_t>(leaderExchangeWindows(nodes.count(), s.throttle)) + 2);
  ScheduleRound &gather = schedule.rounds.front(), &scatter = schedule.rounds.back();
  for (int j = 0; j < leaders; ++j) {
    if (j == local) continue;
    const int64_t bytes = nodes.blocksVia(node, j) * s.blockBytes;
    gather.sends.push_back({nodes.leaderRank(node, j), bytes});
    scatter.recvs.push_back({nodes.leaderRank(node, j), bytes});
  }
  if (local >= leaders) return schedule;
  const int64_t chunk = nodes.blocksVia(node, local) * s.blockBytes;
  for (int other = 0; other < nodes.size(node); ++other) {
    if (other == local) continue;
    gather.recvs.push_back({nodes.leaderRank(node, other), chunk});
    scatter.sends.push_back({nodes.leaderRank(node, other), chunk});
  }
  for (int n = local; n < nodes.count(); n += leaders) {
    if (n == node) continue;  // the blocks that stay on the node: a local copy
    const int partner = nodes.leaderRank(n, node % nodes.leaders(n));
    const int64_t bytes = int64_t{nodes.size(node)} * nodes.size(n) * s.blockBytes;
    const int count = nodes.count();
    schedule.rounds[window((n - node + count) % count)].sends.push_back({partner, bytes});
    schedule.rounds[window((node - n + count) % count)].recvs.push_back({partner, bytes});
  }
  return schedule;
}

// The relay (alltoall_hierarchical_relay.cc): readies from every target of
// a write to its origin (round 0); each block for another node written into
// the G of the leader that handles that node, each block for the own node
// to its destination (1); each leader's run per remote destination (2).
AlltoallSchedule relay(const ScheduleShape& s) {
  const Nodes nodes{s.ranks, s.ranksPerNode, s.leaders};
  const int node = s.rank / s.ranksPerNode, local = s.rank % s.ranksPerNode;
  const int64_t block = s.blockBytes;
  AlltoallSchedule schedule;
  schedule.rounds.resize(4);
  if (block == 0) return schedule;
  std::set<int> targets, writers;
  ScheduleRound &writes = schedule.rounds[1], &relays = schedule.rounds[2];
  for (int other = 0; other < nodes.size(node); ++other) {  // the own node: one block each way
    if (other == local) continue;
    const int peer = nodes.leaderRank(node, other);
    writes.sends.push_back({peer, block});
    relays.recvs.push_back({peer, block});
    targets.insert(peer);
    writers.insert(peer);
  }
  for (int n = 0; n < nodes.count(); ++n) {
    if (n == node) continue;
    const int via = n % nodes.leaders(node), from = nodes.leaderRank(n, node % nodes.leaders(n));
    relays.recvs.push_back({from, nodes.size(n) * block});  // the blocks of every source on n
    writers.insert(from);
    for (int d = 0; d < nodes.size(n); ++d) {
      const int destination = nodes.leaderRank(n, d);
      if (via != local) {
        writes.sends.push_back({nodes.leaderRank(node, via), block});
        targets.insert(nodes.leaderRank(node, via));
        continue;
      }
      for (int other = 0; other < nodes.size(node); ++other) {
        if (other != local) writes.recvs.push_back({nodes.leaderRank(node, other), block});
      }
      relays.sends.push_back({destination, nodes.size(node) * block});
      targets.insert(destination);
    }
  }
  for (int writer : writers) schedule.rounds[0].sends.push_back({writer, 0});
  for (int target : targets) schedule.rounds[0].recvs.push_back({target, 0});
  return schedule;
}

Status checkShape(AlltoallAlgorithm algorithm, const ScheduleShape& s) {
  if (s.ranks < 1 || s.rank < 0 || s.rank >= s.ranks) {
    return makeError(Code::kInvalidArgument, "alltoall schedule: rank ", s.rank, " of ", s.ranks, " ranks");
  }
  if (s.blockBytes < 0) return makeError(Code::kInvalidArgument, "alltoall schedule: ", s.blockBytes, " block bytes");
  if (algorithm == AlltoallAlgorithm::kBruckRadix && s.radix < 2) {
    return makeError(Code::kInvalidArgument, "alltoall schedule: radix ", s.radix, " (must be >= 2)");
  }
  if (s.throttle < 0) return makeError(Code::kInvalidArgument, "alltoall schedule: throttle ", s.throttle);
  if (s.ranksPerNode < 1 || s.leaders < 1) {
    return makeError(Code::kInvalidArgument, "alltoall schedule: ", s.ranksPerNode, " ranks per node, ", s.leaders,
                     " leaders (each at least 1)");
  }
  return Status::ok();
}

}  // namespace

Result<AlltoallSchedule> alltoallSchedule(AlltoallAlgorithm algorithm, const ScheduleShape& shape) {
  IBDT_RETURN_IF_ERROR(checkShape(algorithm, shape));
  switch (algorithm) {
    case AlltoallAlgorithm::kPairwise:
      return pairwise(shape);
    case AlltoallAlgorithm::kBruckBasic:
      return bruckBasic(shape);
    case AlltoallAlgorithm::kBruckModified:
    case AlltoallAlgorithm::kBruckZeroCopy:
      return bruckModified(shape, 2);
    case AlltoallAlgorithm::kBruckRadix:
      return bruckModified(shape, shape.radix);
    case AlltoallAlgorithm::kHierarchical:
      return shape.relay ? relay(shape) : hierarchical(shape);
    case AlltoallAlgorithm::kDirectWrite:
    case AlltoallAlgorithm::kSharedMemory:  // its copies: p - 1 blocks out and in, in one step
      return directWrite(shape);
    default:
      break;
  }
  return makeError(Code::kInvalidArgument, "alltoall schedule: \"", alltoallAlgorithmName(algorithm),
                   "\" is not an algorithm with a schedule");
}

ScheduleTotals scheduleTotals(const AlltoallSchedule& schedule) {
  ScheduleTotals totals;
  for (const ScheduleRound& round : schedule.rounds) {
    for (const ScheduledMessage& send : round.sends) {
      ++totals.sentMessages;
      totals.sentBytes += send.bytes;
    }
    for (const ScheduledMessage& recv : round.recvs) {
      ++totals.recvMessages;
      totals.recvBytes += recv.bytes;
    }
  }
  return totals;
}

}  // namespace ibdt::collectives
