// The in-place alltoallv's small blocks inside phase 0's control messages
// (docs/alltoallv.md, "In-place: small blocks inside the control message"),
// ranks as threads over the loopback fabric: all pairs inline (one message
// each way, counted), inline and phased pairs mixed (blocks at and just
// over the limit, auxiliary memory from one element to 1 MiB), plans with
// different counts started alternately on one communicator, and a pair
// whose counts disagree about inlining or a dead rank failing instead of
// hanging. Every byte of every buffer, guards and gaps included, is checked.
#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <string>
#include <thread>

#include "collectives/alltoallv_data.h"
#include "collectives/inplace_control_messages.h"
#include "collectives/world.h"
#include "ibdt/collectives.h"
#include "support/thread_ranks.h"

namespace ibdt::collectives {
namespace {

using datatype::Datatype;
using messaging::testing::RankEnv;
using messaging::testing::runRanks;
using messaging::testing::soon;
using testing::CountMatrix;
using testing::InPlaceBuffer;
using testing::world;

constexpr int64_t kItem = 4;                                   // int32 elements
constexpr int64_t kInlineItems = kInPlaceInlineBytes / kItem;  // the largest inline block

// Beyond a: O(p) bookkeeping (as alltoallv_thread_test.cc) and, when a is
// smaller than them, the inline blocks both ways.
int64_t extraBound(int size, int64_t auxBytes) {
  return auxBytes + 4096 + 1024 * int64_t{size} + 2 * int64_t{size - 1} * kInPlaceInlineBytes;
}

uint64_t messagesSent(const messaging::Context& context) {
  const auto& counts = context.counters().schemeCount;
  return std::accumulate(std::begin(counts), std::end(counts), uint64_t{0});
}

// counts[i][j] from `count(i, j)`.
template <typename Count>
CountMatrix matrix(int size, Count count) {
  CountMatrix counts(static_cast<size_t>(size), std::vector<int64_t>(static_cast<size_t>(size), 0));
  for (int i = 0; i < size; ++i) {
    for (int j = 0; j < size; ++j) counts[static_cast<size_t>(i)][static_cast<size_t>(j)] = count(i, j);
  }
  return counts;
}

Result<Plan> inPlacePlan(Communicator& comm, InPlaceBuffer& buffer, int64_t auxBytes) {
  AlltoallvOptions options;
  options.algorithm = AlltoallvAlgorithm::kInPlaceLimited;  // not the shared segment, which auto takes where it fits
  options.inplaceBytes = auxBytes;
  return alltoallvInit(comm, kInPlace, buffer.sendcounts(), buffer.sdispls(), Datatype(), buffer.buffer(),
                       buffer.recvcounts(), buffer.rdispls(), Datatype::of<int32_t>(), options);
}

// One run of `plan` on fresh data, every byte checked; the messages this
// rank sent during it are returned.
uint64_t runChecked(RankEnv& env, int size, Plan& plan, InPlaceBuffer& buffer, int64_t auxBytes, const std::string& where) {
  buffer.refill();
  env.barrier();  // every buffer is refilled before anyone's run writes into it
  const uint64_t before = messagesSent(env.context);
  EXPECT_TRUE(plan.start().isOk()) << where;
  Status status = plan.wait(soon());
  const uint64_t sent = messagesSent(env.context) - before;
  EXPECT_TRUE(status.isOk()) << where << ": " << status.toString();
  EXPECT_EQ(buffer.check(), "") << where;
  EXPECT_LE(plan.peakExtraBytes(), extraBound(size, auxBytes)) << where;
  env.barrier();
  return sent;
}

class InPlaceInlineThreads : public ::testing::TestWithParam<int> {};

// Every block fits a control message (zeros, one item, the limit): each
// rank sends exactly one message to every other rank per run, also with
// auxiliary memory of one element.
TEST_P(InPlaceInlineThreads, AllInlineTakesOneMessagePerPeer) {
  const int size = GetParam();
  runRanks(size, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    const CountMatrix counts = matrix(size, [](int i, int j) {
      const int64_t choices[] = {0, 1, 7, kInlineItems - 1, kInlineItems};
      return choices[(i * 3 + j * 5 + i * j) % 5];
    });
    for (int64_t auxBytes : {kItem, int64_t{1} << 20}) {
      InPlaceBuffer buffer(counts, kItem, env.rank, 31 + static_cast<uint64_t>(auxBytes));
      auto plan = inPlacePlan(*comm, buffer, auxBytes);
      ASSERT_TRUE(plan.isOk()) << plan.status().toString();
      for (int run = 0; run < 3; ++run) {
        const std::string where = "a " + std::to_string(auxBytes) + " run " + std::to_string(run);
        EXPECT_EQ(runChecked(env, size, *plan, buffer, auxBytes, where), static_cast<uint64_t>(size - 1)) << where;
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  });
}

// Some blocks inline (up to the limit), others just over it or large, from
// a seed; a from one element (the phases' worst case) to 1 MiB (copy path).
TEST_P(InPlaceInlineThreads, MixedInlineAndPhasedPairs) {
  const int size = GetParam();
  runRanks(size, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    for (uint64_t seed : {uint64_t{1}, uint64_t{2}, uint64_t{3}}) {
      std::mt19937_64 random(seed * 977 + static_cast<uint64_t>(size));
      const CountMatrix counts = matrix(size, [&](int, int) -> int64_t {
        switch (random() % 5) {
          case 0: return 0;
          case 1: return kInlineItems;
          case 2: return kInlineItems + 1;
          case 3: return static_cast<int64_t>(1 + random() % kInlineItems);
          default: return static_cast<int64_t>(kInlineItems + random() % 2000);
        }
      });
      for (int64_t auxBytes : {kItem, int64_t{512}, int64_t{1} << 20}) {
        InPlaceBuffer buffer(counts, kItem, env.rank, seed + static_cast<uint64_t>(auxBytes));
        auto plan = inPlacePlan(*comm, buffer, auxBytes);
        ASSERT_TRUE(plan.isOk()) << plan.status().toString();
        for (int run = 0; run < 2; ++run) {
          runChecked(env, size, *plan, buffer, auxBytes,
                     "seed " + std::to_string(seed) + " a " + std::to_string(auxBytes) + " run " + std::to_string(run));
          if (::testing::Test::HasFatalFailure()) return;
        }
      }
    }
  });
}

// Plans whose counts differ (all inline, all phased, mixed, empty) on one
// communicator, started alternately: each run's pairs go inline or not by
// that plan's counts.
TEST_P(InPlaceInlineThreads, PlansWithChangingCountsAlternate) {
  const int size = GetParam();
  runRanks(size, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    const CountMatrix shapes[] = {
        matrix(size, [](int i, int j) { return int64_t{1} + (i + 2 * j) % kInlineItems; }),
        matrix(size, [](int i, int j) { return kInlineItems + 1 + (i * 7 + j) % 300; }),
        matrix(size, [](int i, int j) { return (i + j) % 2 == 0 ? int64_t{3} : int64_t{500}; }),
        matrix(size, [](int, int) { return int64_t{0}; }),
    };
    std::vector<InPlaceBuffer> buffers;
    std::vector<Plan> plans;
    for (size_t shape = 0; shape < std::size(shapes); ++shape) {
      buffers.emplace_back(shapes[shape], kItem, env.rank, 70 + shape);
    }
    for (auto& buffer : buffers) {
      auto plan = inPlacePlan(*comm, buffer, 2048);
      ASSERT_TRUE(plan.isOk()) << plan.status().toString();
      plans.push_back(std::move(*plan));
    }
    for (int round = 0; round < 3; ++round) {
      for (size_t shape = 0; shape < plans.size(); ++shape) {
        runChecked(env, size, plans[shape], buffers[shape], 2048,
                   "shape " + std::to_string(shape) + " round " + std::to_string(round));
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, InPlaceInlineThreads, ::testing::Values(1, 2, 3, 4, 5, 7),
                         [](const auto& ranks) { return "np" + std::to_string(ranks.param); });

// Rank 0 expects another count from rank 1 than rank 1 sends, so their
// phase-0 messages differ in length (inline expected but not sent, sent but
// not expected, both inline but of other sizes): both fail naming the other,
// nobody waits until the deadline.
TEST(InPlaceInline, MismatchedPairFailsOnBothRanks) {
  const std::pair<int64_t, int64_t> cases[] = {{2, 3}, {2, 100}, {100, 2}, {kInlineItems, kInlineItems + 1}};
  for (const auto& [sentItems, expectedItems] : cases) {
    const int64_t sent = sentItems, expected = expectedItems;  // captured below (clang 14: no bindings in lambdas)
    runRanks(4, {}, [&](RankEnv& env) {
      auto comm = world(env);
      ASSERT_NE(comm, nullptr);
      CountMatrix counts = matrix(4, [](int i, int j) { return int64_t{1} + i + j; });
      counts[1][0] = env.rank == 0 ? expected : sent;  // only rank 0 believes `expected`
      InPlaceBuffer buffer(counts, kItem, env.rank, 5);
      auto plan = inPlacePlan(*comm, buffer, int64_t{1} << 20);
      ASSERT_TRUE(plan.isOk()) << plan.status().toString();
      ASSERT_TRUE(plan->start().isOk());
      Status status = plan->wait(soon());
      const std::string where = "sent " + std::to_string(sent) + " expected " + std::to_string(expected);
      EXPECT_NE(status.code(), Code::kTimeout) << where << ": " << status.toString();
      if (env.rank <= 1) {
        ASSERT_FALSE(status.isOk()) << where << " rank " << env.rank;
        EXPECT_NE(status.toString().find("rank " + std::to_string(1 - env.rank)), std::string::npos)
            << where << ": " << status.toString();
      }
    });
  }
}

// Rank 3's Context is gone before an all-inline exchange: every survivor
// ends with an error, not the deadline.
TEST(InPlaceInline, DeadRankFailsEverySurvivor) {
  messaging::testing::Ranks ranks = messaging::testing::createRanks(4, {});
  for (auto& context : ranks.contexts) ASSERT_NE(context, nullptr);
  ranks.contexts[3].reset();
  const CountMatrix counts = matrix(4, [](int i, int j) { return int64_t{2} + i * j; });
  std::vector<std::thread> survivors;
  for (int rank = 0; rank < 3; ++rank) {
    survivors.emplace_back([&, rank] {
      auto comm = Communicator::create(*ranks.contexts[static_cast<size_t>(rank)]);
      ASSERT_TRUE(comm.isOk());
      InPlaceBuffer buffer(counts, kItem, rank, 13);
      Status status = alltoallv(**comm, kInPlace, buffer.sendcounts(), buffer.sdispls(), Datatype(),
                                buffer.buffer(), buffer.recvcounts(), buffer.rdispls(), Datatype::of<int32_t>(),
                                {}, Deadline::after(std::chrono::seconds(30)));
      ASSERT_FALSE(status.isOk()) << "rank " << rank;
      EXPECT_NE(status.code(), Code::kTimeout) << status.toString();
    });
  }
  for (auto& thread : survivors) thread.join();
}

}  // namespace
}  // namespace ibdt::collectives
