// Small collectives (allgather, allreduce min/max/sum, broadcast) with ranks
// as threads over the loopback fabric, for p in {1, 2, 3, 4, 5, 7, 8}:
// every value checked against what each rank contributed, persistent plans
// restarted with new data, and bad arguments refused at init.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "collectives/world.h"
#include "ibdt/collectives.h"
#include "support/thread_ranks.h"

namespace ibdt::collectives {
namespace {

using messaging::testing::RankEnv;
using messaging::testing::runRanks;
using messaging::testing::soon;

// Value i of rank r in run `run`: distinct per (run, rank, i), negative for
// some so min and max are not just the rank order.
int64_t valueOf(int run, int rank, int64_t i) {
  const int64_t v = (rank + 1) * 1000003LL + i * 7919 + run * 104729;
  return (rank + i + run) % 3 == 0 ? -v : v;
}

using testing::world;

class SmallCollectives : public ::testing::TestWithParam<int> {};

TEST_P(SmallCollectives, AllgatherEveryValueOfEveryRankRestarted) {
  const int size = GetParam();
  runRanks(size, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    for (int64_t count : {0, 1, 3, 100}) {
      std::vector<int64_t> send(static_cast<size_t>(count)), recv(static_cast<size_t>(count * size) + 1, -7);
      auto plan = allgatherInit(*comm, send.data(), count, recv.data());
      ASSERT_TRUE(plan.isOk()) << plan.status().toString();
      for (int run = 0; run < 3; ++run) {
        for (int64_t i = 0; i < count; ++i) send[static_cast<size_t>(i)] = valueOf(run, env.rank, i);
        ASSERT_TRUE(plan->start().isOk());
        Status status = plan->wait(soon());
        ASSERT_TRUE(status.isOk()) << status.toString();
        for (int r = 0; r < size; ++r) {
          for (int64_t i = 0; i < count; ++i) {
            ASSERT_EQ(recv[static_cast<size_t>(r * count + i)], valueOf(run, r, i)) << "rank " << r << " value " << i;
          }
        }
        EXPECT_EQ(recv.back(), -7);  // nothing written past the end
        env.barrier();  // nobody changes its input while a peer may still read it
      }
    }
  });
}

TEST_P(SmallCollectives, AllreduceMinMaxSumInPlaceAndNot) {
  const int size = GetParam();
  runRanks(size, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    constexpr int64_t kCount = 5;
    for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kSum}) {
      for (bool inPlace : {false, true}) {
        std::vector<int64_t> send(kCount), separate(kCount);
        int64_t* recv = inPlace ? send.data() : separate.data();
        auto plan = allreduceInit(*comm, send.data(), recv, kCount, op);
        ASSERT_TRUE(plan.isOk()) << plan.status().toString();
        for (int run = 0; run < 2; ++run) {
          for (int64_t i = 0; i < kCount; ++i) send[static_cast<size_t>(i)] = valueOf(run, env.rank, i);
          ASSERT_TRUE(plan->start().isOk());
          ASSERT_TRUE(plan->wait(soon()).isOk());
          for (int64_t i = 0; i < kCount; ++i) {
            int64_t expected = valueOf(run, 0, i);
            for (int r = 1; r < size; ++r) {
              const int64_t v = valueOf(run, r, i);
              expected = op == ReduceOp::kMin ? std::min(expected, v) : op == ReduceOp::kMax ? std::max(expected, v)
                                                                                            : expected + v;
            }
            EXPECT_EQ(recv[i], expected) << "op " << static_cast<int>(op) << " value " << i;
          }
          env.barrier();
        }
      }
    }
  });
}

TEST_P(SmallCollectives, BroadcastFromEveryRoot) {
  const int size = GetParam();
  runRanks(size, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    for (int root = 0; root < size; ++root) {
      std::vector<int64_t> values(4, -1);
      auto plan = broadcastInit(*comm, values.data(), 4, root);
      ASSERT_TRUE(plan.isOk()) << plan.status().toString();
      for (int run = 0; run < 2; ++run) {
        if (env.rank == root) {
          for (int64_t i = 0; i < 4; ++i) values[static_cast<size_t>(i)] = valueOf(run, root, i);
        }
        ASSERT_TRUE(plan->start().isOk());
        ASSERT_TRUE(plan->wait(soon()).isOk());
        for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(values[static_cast<size_t>(i)], valueOf(run, root, i));
        env.barrier();
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, SmallCollectives, ::testing::Values(1, 2, 3, 4, 5, 7, 8),
                         [](const auto& ranks) { return "np" + std::to_string(ranks.param); });

TEST(SmallCollectivesErrors, BadArgumentsAreRefusedAtInit) {
  runRanks(2, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    int64_t values[4] = {};
    auto expectError = [](Result<Plan> plan, Code code, const char* words) {
      ASSERT_FALSE(plan.isOk());
      EXPECT_EQ(plan.status().code(), code) << plan.status().toString();
      EXPECT_NE(plan.status().toString().find(words), std::string::npos) << plan.status().toString();
    };
    expectError(allgatherInit(*comm, values, -1, values), Code::kInvalidArgument, "count -1");
    expectError(allgatherInit(*comm, nullptr, 2, values), Code::kInvalidArgument, "null buffer");
    expectError(allreduceInit(*comm, values, values, 1, static_cast<ReduceOp>(9)), Code::kInvalidArgument,
                "unknown operation");
    expectError(broadcastInit(*comm, values, 1, 2), Code::kInvalidArgument, "root 2");
    expectError(broadcastInit(*comm, values, 1, -1), Code::kInvalidArgument, "root -1");
    // Nothing was taken from the communicator: a valid collective still agrees.
    int64_t mine = env.rank, sum = 0;
    ASSERT_TRUE(allreduce(*comm, &mine, &sum, 1, ReduceOp::kSum, soon()).isOk());
    EXPECT_EQ(sum, 1);
  });
}

}  // namespace
}  // namespace ibdt::collectives
