// Multiple alltoall (Jocksch II-C) with ranks as threads over the loopback
// fabric: the rows of a process grid, within a node or across nodes, each
// run an alltoall through one merged plan; every byte of every row's
// receive buffers checked, persistent runs, and rows that do not partition
// the communicator fail init on every rank.
#include <gtest/gtest.h>

#include <vector>

#include "collectives/alltoall_data.h"
#include "ibdt/collectives.h"
#include "support/thread_ranks.h"

namespace ibdt::collectives {
namespace {

using messaging::testing::RankEnv;
using messaging::testing::runRanks;
using messaging::testing::soon;
using testing::AlltoallBuffers;
using testing::Side;

// Ranks in blocks over `nodes` nodes (lower nodes take the extra ranks).
std::vector<NodeInfo> blockNodes(int size, int nodes) {
  std::vector<NodeInfo> map;
  std::vector<int> local(static_cast<size_t>(nodes), 0);
  for (int r = 0; r < size; ++r) {
    const int node = r * nodes / size;
    map.push_back({node, local[static_cast<size_t>(node)]++});
  }
  return map;
}

struct Grid {
  int ranks, nodes, rows;
  bool strided;  // row of rank r: r % rows (rows cross nodes), else r / (ranks / rows)
};

class MultipleThreads : public ::testing::TestWithParam<Grid> {};

TEST_P(MultipleThreads, EveryRowGetsItsBlocks) {
  const Grid grid = GetParam();
  // Node-local hops as messages (the default below the rendezvous size),
  // then one-sided (every nonempty chunk: exchangeZeroCopyMin = 1).
  for (int64_t singleCopyFrom : {int64_t{0}, int64_t{1}}) {
    messaging::Options hops;
    hops.exchangeZeroCopyMin = singleCopyFrom;
    runRanks(grid.ranks, hops, [&](RankEnv& env) {
      auto world = Communicator::create(env.context, blockNodes(grid.ranks, grid.nodes));
      ASSERT_TRUE(world.isOk());
      const int colour = grid.strided ? env.rank % grid.rows : env.rank / (grid.ranks / grid.rows);
      auto row = (*world)->split(colour, env.rank, soon());
      ASSERT_TRUE(row.isOk()) << row.status().toString();
      // 1 leader one node pair at a time, 2 leaders directly, 1 by Bruck.
      for (auto [leaders, exchange] : {std::pair{1, LeaderExchange::kDirect}, std::pair{2, LeaderExchange::kDirect},
                                       std::pair{1, LeaderExchange::kBruck}}) {
        AlltoallOptions options;
        options.leaders = leaders;
        options.leaderExchange = exchange;
        options.throttle = exchange == LeaderExchange::kDirect && leaders == 1 ? 1 : 8;
        Side strided = testing::vectorSide(5);
        const std::vector<std::pair<Side, Side>> cases = {
            {testing::byteSide(0), testing::byteSide(0)},
            {testing::byteSide(13), testing::byteSide(13)},
            {testing::byteSide(3000), testing::byteSide(3000)},
            {strided, testing::denseSide(strided.type, 5)},
        };
        for (const auto& [send, recv] : cases) {
          AlltoallBuffers buffers(send, recv, (*row)->size(), (*row)->rank());
          auto plan = multipleAlltoallInit(**world, **row, buffers.sendbuf(), send.count, send.type, buffers.recvbuf(),
                                           recv.count, recv.type, options);
          ASSERT_TRUE(plan.isOk()) << plan.status().toString();
          EXPECT_EQ(plan->algorithm(), "multiple alltoall");
          for (int run = 0; run < 2; ++run) {
            buffers.clearReceive();
            ASSERT_TRUE(plan->start().isOk());
            Status status = plan->wait(soon());
            ASSERT_TRUE(status.isOk()) << status.toString();
            EXPECT_EQ(buffers.check(), "")
                << send.bytes() << " bytes, leaders " << leaders << ", " << leaderExchangeName(exchange) << ", run "
                << run << (singleCopyFrom == 1 ? ", one-sided" : "");
            env.barrier();
          }
        }
      }
    });
  }
}

INSTANTIATE_TEST_SUITE_P(Grids, MultipleThreads,
                         ::testing::Values(Grid{4, 2, 2, false}, Grid{4, 2, 2, true}, Grid{6, 2, 2, true},
                                           Grid{6, 3, 3, false}, Grid{8, 2, 4, true}, Grid{8, 2, 2, false},
                                           Grid{7, 3, 7, false}, Grid{5, 2, 1, false}),
                         [](const ::testing::TestParamInfo<Grid>& grid) {
                           return "np" + std::to_string(grid.param.ranks) + "_nodes" +
                                  std::to_string(grid.param.nodes) + "_rows" + std::to_string(grid.param.rows) +
                                  (grid.param.strided ? "_across" : "_within");
                         });

// Rank 0 passes the whole communicator as its row while the other ranks
// pass their halves: the rows overlap, and every rank must fail at init.
TEST(MultipleThreadsErrors, RowsThatDoNotPartitionFailEveryRank) {
  runRanks(4, {}, [&](RankEnv& env) {
    auto world = Communicator::create(env.context, blockNodes(4, 2));
    ASSERT_TRUE(world.isOk());
    auto half = (*world)->split(env.rank % 2, env.rank, soon());
    ASSERT_TRUE(half.isOk());
    Communicator& row = env.rank == 0 ? **world : **half;
    std::vector<uint8_t> send(4 * 8), recv(4 * 8);
    const datatype::Datatype byte = datatype::Datatype::basic(datatype::BasicKind::kByte);
    auto plan = multipleAlltoallInit(**world, row, send.data(), 8, byte, recv.data(), 8, byte);
    ASSERT_FALSE(plan.isOk()) << "rank " << env.rank;
    EXPECT_EQ(plan.status().code(), Code::kInvalidArgument);
    EXPECT_NE(plan.status().toString().find("partition"), std::string::npos) << plan.status().toString();
  });
}

}  // namespace
}  // namespace ibdt::collectives
