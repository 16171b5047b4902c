// Dissemination barrier with ranks as threads over the loopback fabric: no
// rank leaves a barrier before every rank entered it, over many rounds and
// every rank count from 1 to 7 (powers of two and not), and a barrier
// that one rank has not joined cannot complete however long the others
// poll.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "collectives/plan_checks.h"
#include "ibdt/collectives.h"
#include "support/thread_ranks.h"

namespace ibdt::collectives {
namespace {

using messaging::testing::RankEnv;
using messaging::testing::runRanks;

class BarrierThreads : public ::testing::TestWithParam<int> {};

// Before barrier i every rank counts itself into entered[i]; after it, every
// rank must see all of them. A barrier that let a rank through early would
// show a count below the size.
TEST_P(BarrierThreads, NoRankLeavesBeforeAllEntered) {
  const int size = GetParam();
  constexpr int kRounds = 40;
  std::vector<std::atomic<int>> entered(kRounds);
  runRanks(size, {}, [&](RankEnv& env) {
    auto comm = Communicator::create(env.context);
    ASSERT_TRUE(comm.isOk()) << comm.status().toString();
    auto plan = barrierInit(**comm);
    ASSERT_TRUE(plan.isOk()) << plan.status().toString();
    EXPECT_EQ(plan->algorithm(), "dissemination");
    for (int i = 0; i < kRounds; ++i) {
      entered[static_cast<size_t>(i)].fetch_add(1);
      // Alternate the persistent plan and the blocking call.
      Status status = i % 2 == 0 ? barrier(**comm, messaging::testing::soon()) : plan->start();
      if (status.isOk() && i % 2 == 1) status = plan->wait(messaging::testing::soon());
      ASSERT_TRUE(status.isOk()) << "rank " << env.rank << ", barrier " << i << ": " << status.toString();
      ASSERT_EQ(entered[static_cast<size_t>(i)].load(), size) << "rank " << env.rank << " left barrier " << i
                                                              << " before every rank entered it";
    }
  });
}

// The last rank joins only after every other rank has started the barrier
// and polled it many times without completing it.
TEST_P(BarrierThreads, WaitsForTheLastRank) {
  const int size = GetParam();
  if (size < 2) GTEST_SKIP() << "needs a second rank";
  constexpr int kPolls = 2000;
  std::atomic<int> polledEnough{0};
  std::atomic<int> finishedEarly{0};
  runRanks(size, {}, [&](RankEnv& env) {
    auto comm = Communicator::create(env.context);
    ASSERT_TRUE(comm.isOk()) << comm.status().toString();
    auto plan = barrierInit(**comm);
    ASSERT_TRUE(plan.isOk());
    const bool last = env.rank == size - 1;
    if (last) {
      const Deadline deadline = messaging::testing::soon();
      while (polledEnough.load() < size - 1 && !deadline.expired()) std::this_thread::yield();
      ASSERT_EQ(polledEnough.load(), size - 1) << "the other ranks did not poll in time";
    }
    ASSERT_TRUE(plan->start().isOk());
    if (!last) {
      for (int i = 0; i < kPolls; ++i) {
        auto done = plan->test();
        ASSERT_TRUE(done.isOk()) << done.status().toString();
        if (*done) finishedEarly.fetch_add(1);
      }
      polledEnough.fetch_add(1);
    }
    Status status = plan->wait(messaging::testing::soon());
    ASSERT_TRUE(status.isOk()) << "rank " << env.rank << ": " << status.toString();
  });
  EXPECT_EQ(finishedEarly.load(), 0) << "a barrier completed while one rank had not joined";
}

// A wait that gives up leaves the barrier active and resumable: rank 1
// joins only after rank 0's wait timed out, and rank 0's next wait ends it.
TEST(BarrierThreadsPlan, TimedOutWaitResumes) {
  runRanks(2, {}, [&](RankEnv& env) {
    auto comm = Communicator::create(env.context);
    ASSERT_TRUE(comm.isOk()) << comm.status().toString();
    auto plan = barrierInit(**comm);
    ASSERT_TRUE(plan.isOk());
    ASSERT_NO_FATAL_FAILURE(testing::checkTimedOutWaitResumes(env, *plan, "rank 1"));
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, BarrierThreads, ::testing::Values(1, 2, 3, 4, 5, 7),
                         [](const ::testing::TestParamInfo<int>& param) {
                           return std::to_string(param.param) + "ranks";
                         });

}  // namespace
}  // namespace ibdt::collectives
