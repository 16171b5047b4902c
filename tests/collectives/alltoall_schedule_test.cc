// The all-to-all schedules as data (collectives/alltoall_schedule.h,
// docs/simulator.md): every rank's totals equal kAuto's α-β volumes
// (alltoall_select.h) and the closed forms of the papers, every send of a
// round is a receive of the same round at its peer, with the same bytes,
// and bad shapes are refused.
#include "collectives/alltoall_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include "collectives/alltoall_select.h"

namespace ibdt::collectives {
namespace {

constexpr int64_t kBlockSizes[] = {0, 1, 7, 4096};

std::vector<AlltoallSchedule> allRanks(AlltoallAlgorithm algorithm, ScheduleShape shape) {
  std::vector<AlltoallSchedule> schedules;
  for (shape.rank = 0; shape.rank < shape.ranks; ++shape.rank) {
    Result<AlltoallSchedule> schedule = alltoallSchedule(algorithm, shape);
    EXPECT_TRUE(schedule.isOk()) << schedule.status().message();
    schedules.push_back(schedule.isOk() ? *schedule : AlltoallSchedule{});
  }
  return schedules;
}

// Every (round, from, to, bytes) sent is received exactly once, and nothing else is.
void expectMatched(const std::vector<AlltoallSchedule>& ranks, const std::string& what) {
  std::map<std::tuple<size_t, int, int, int64_t>, int> inFlight;
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    for (size_t r = 0; r < ranks[rank].rounds.size(); ++r) {
      for (const ScheduledMessage& send : ranks[rank].rounds[r].sends) {
        ++inFlight[{r, static_cast<int>(rank), send.peer, send.bytes}];
      }
      for (const ScheduledMessage& recv : ranks[rank].rounds[r].recvs) {
        --inFlight[{r, recv.peer, static_cast<int>(rank), recv.bytes}];
      }
    }
  }
  for (const auto& [message, count] : inFlight) {
    EXPECT_EQ(count, 0) << what << ": round " << std::get<0>(message) << " from " << std::get<1>(message) << " to "
                        << std::get<2>(message) << ", " << std::get<3>(message) << " bytes";
  }
}

int ceilLog(int p, int64_t radix) {
  int rounds = 0;
  for (int64_t weight = 1; weight < p; weight *= radix) ++rounds;
  return rounds;
}

TEST(AlltoallSchedule, EveryRankSendsWhatTheCostModelPrices) {
  const std::pair<AlltoallAlgorithm, int64_t> cases[] = {
      {AlltoallAlgorithm::kPairwise, 2},   {AlltoallAlgorithm::kBruckBasic, 2}, {AlltoallAlgorithm::kBruckModified, 2},
      {AlltoallAlgorithm::kBruckZeroCopy, 2}, {AlltoallAlgorithm::kBruckRadix, 3}, {AlltoallAlgorithm::kBruckRadix, 4},
      {AlltoallAlgorithm::kBruckRadix, 8}, {AlltoallAlgorithm::kBruckRadix, 100}};
  for (const auto& [algorithm, radix] : cases) {
    for (int p = 1; p <= 64; ++p) {
      for (int64_t b : kBlockSizes) {
        const std::string what = std::string(alltoallAlgorithmName(algorithm)) + " r=" + std::to_string(radix) +
                                 " p=" + std::to_string(p) + " b=" + std::to_string(b);
        ScheduleShape shape;
        shape.ranks = p;
        shape.blockBytes = b;
        shape.radix = radix;
        const std::vector<AlltoallSchedule> ranks = allRanks(algorithm, shape);
        const AlltoallVolume volume = alltoallVolume(algorithm, radix, p, b);
        for (const AlltoallSchedule& schedule : ranks) {
          const ScheduleTotals totals = scheduleTotals(schedule);
          ASSERT_EQ(totals.sentMessages, volume.messages) << what;
          ASSERT_EQ(totals.sentBytes, volume.bytes) << what;
          ASSERT_EQ(totals.recvMessages, totals.sentMessages) << what;
          ASSERT_EQ(totals.recvBytes, totals.sentBytes) << what;
        }
        expectMatched(ranks, what);
        // The papers' closed forms: p - 1 direct messages; radix-r Bruck in
        // ceil(log_r p) rounds of at most r - 1 messages, every block at
        // least once; radix 2 at p = 2^k moves p/2 blocks per round.
        if (algorithm == AlltoallAlgorithm::kPairwise || radix >= p) {
          EXPECT_EQ(volume.messages, p - 1) << what;
          EXPECT_EQ(volume.bytes, (p - 1) * b) << what;
          continue;
        }
        const int rounds = ceilLog(p, radix);
        EXPECT_EQ(ranks[0].rounds.size(), static_cast<size_t>(rounds)) << what;
        EXPECT_LE(volume.messages, rounds * (radix - 1)) << what;
        EXPECT_GE(volume.bytes, (p - 1) * b) << what;
        if (radix == 2 && (p & (p - 1)) == 0) {
          EXPECT_EQ(volume.bytes, int64_t{p} / 2 * rounds * b) << what;
        }
      }
    }
  }
}

TEST(AlltoallSchedule, HierarchicalMovesEveryInterNodeBlockOnceBetweenLeaders) {
  for (int p = 1; p <= 40; ++p) {
    for (int perNode : {1, 2, 3, 4, 8}) {
      for (int leaders : {1, 2, 3}) {
        const std::string what = "p=" + std::to_string(p) + " per node " + std::to_string(perNode) + " leaders " +
                                 std::to_string(leaders);
        ScheduleShape shape;
        shape.ranks = p;
        shape.blockBytes = 3;
        shape.ranksPerNode = perNode;
        shape.leaders = leaders;
        const std::vector<AlltoallSchedule> ranks = allRanks(AlltoallAlgorithm::kHierarchical, shape);
        expectMatched(ranks, what);
        int64_t exchanged = 0, local = 0;
        for (int node = 0; node * perNode < p; ++node) {
          const int64_t size = std::min(perNode, p - node * perNode);
          local += size * size;
        }
        for (const AlltoallSchedule& schedule : ranks) {
          ASSERT_EQ(schedule.rounds.size(), 3u) << what;
          for (const ScheduledMessage& send : schedule.rounds[1].sends) exchanged += send.bytes;
        }
        EXPECT_EQ(exchanged, (int64_t{p} * p - local) * 3) << what;
      }
    }
  }
}

// The throttle splits the leaders' exchange into windows by node distance:
// every message still matched in its round, at most `throttle` node pairs
// per leader in each, the same bytes in all.
TEST(AlltoallSchedule, HierarchicalThrottleWindowsTheExchange) {
  for (int nodes : {2, 3, 5, 9}) {
    for (int64_t throttle : {1, 2, 3}) {
      const std::string what = std::to_string(nodes) + " nodes, throttle " + std::to_string(throttle);
      ScheduleShape shape;
      shape.ranks = 2 * nodes;
      shape.blockBytes = 5;
      shape.ranksPerNode = 2;
      shape.throttle = throttle;
      const std::vector<AlltoallSchedule> ranks = allRanks(AlltoallAlgorithm::kHierarchical, shape);
      expectMatched(ranks, what);
      int64_t exchanged = 0;
      for (const AlltoallSchedule& schedule : ranks) {
        ASSERT_EQ(schedule.rounds.size(), static_cast<size_t>(2 + (nodes - 1 + throttle - 1) / throttle)) << what;
        for (size_t r = 1; r + 1 < schedule.rounds.size(); ++r) {
          EXPECT_LE(static_cast<int64_t>(schedule.rounds[r].sends.size()), throttle) << what;
          for (const ScheduledMessage& send : schedule.rounds[r].sends) exchanged += send.bytes;
        }
      }
      EXPECT_EQ(exchanged, int64_t{nodes} * (nodes - 1) * 4 * 5) << what;
    }
  }
}

TEST(AlltoallSchedule, RefusesShapesThatAreNoAlltoall) {
  ScheduleShape shape;
  shape.ranks = 4;
  EXPECT_FALSE(alltoallSchedule(AlltoallAlgorithm::kAuto, shape).isOk());
  shape.rank = 4;
  EXPECT_FALSE(alltoallSchedule(AlltoallAlgorithm::kPairwise, shape).isOk());
  shape.rank = -1;
  EXPECT_FALSE(alltoallSchedule(AlltoallAlgorithm::kPairwise, shape).isOk());
  shape.rank = 0;
  shape.blockBytes = -1;
  EXPECT_FALSE(alltoallSchedule(AlltoallAlgorithm::kBruckBasic, shape).isOk());
  shape.blockBytes = 8;
  shape.radix = 1;
  EXPECT_FALSE(alltoallSchedule(AlltoallAlgorithm::kBruckRadix, shape).isOk());
  shape.radix = 2;
  shape.ranksPerNode = 0;
  EXPECT_FALSE(alltoallSchedule(AlltoallAlgorithm::kHierarchical, shape).isOk());
  shape.ranksPerNode = 2;
  shape.throttle = -1;
  EXPECT_FALSE(alltoallSchedule(AlltoallAlgorithm::kPairwise, shape).isOk());
  shape.throttle = 3;
  Result<AlltoallSchedule> ok = alltoallSchedule(AlltoallAlgorithm::kPairwise, shape);
  ASSERT_TRUE(ok.isOk());
  EXPECT_EQ(ok->window, 3);
  EXPECT_EQ(ok->rounds.size(), 3u);
}

}  // namespace
}  // namespace ibdt::collectives
