// The in-place alltoallv's copy path (docs/alltoallv.md, "In-place: the copy
// path"), ranks as threads over the loopback fabric: every rank copies all
// its outgoing blocks (all pairs exchanged whole in phase 0), none, or some
// (each rank its own auxiliary memory, so one side of a pair copies and the
// other not), over count matrices with zeros, one huge peer, all to one and
// one to all; persistent plans rerun with new data and rebuilt with new
// counts. Every byte of every buffer is checked against what its sender
// meant, and the peak extra memory against a.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <string>

#include "collectives/alltoallv_data.h"
#include "collectives/inplace_plan_runs.h"
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
using testing::Spread;
using testing::world;

constexpr int64_t kItem = 4;  // int32 elements

// Bookkeeping beyond a: O(p), whatever the counts (docs/alltoallv.md).
using testing::inPlaceBookkeepingBound;

int64_t outgoingBytes(const InPlaceBuffer& buffer) {
  return std::accumulate(buffer.sendcounts().begin(), buffer.sendcounts().end(), int64_t{0}) * kItem;
}

// Builds the plan for `buffer` with `auxBytes`, runs it `runs` times (new
// data each time) and checks every byte and the peak after each run.
void runChecked(RankEnv& env, Communicator& comm, InPlaceBuffer& buffer, int64_t auxBytes, int runs,
                const std::string& where, const std::function<void(int64_t peak)>& checkPeak = {}) {
  AlltoallvOptions options;
  options.algorithm = AlltoallvAlgorithm::kInPlaceLimited;  // not the shared segment, which auto takes where it fits
  options.inplaceBytes = auxBytes;
  const Datatype item = Datatype::of<int32_t>();
  auto plan = alltoallvInit(comm, kInPlace, buffer.sendcounts(), buffer.sdispls(), Datatype(), buffer.buffer(),
                            buffer.recvcounts(), buffer.rdispls(), item, options);
  ASSERT_TRUE(plan.isOk()) << where << ": " << plan.status().toString();
  for (int run = 0; run < runs; ++run) {
    buffer.refill();
    env.barrier();  // every buffer is refilled before anyone's run writes into it
    ASSERT_TRUE(plan->start().isOk()) << where;
    Status status = plan->wait(soon());
    ASSERT_TRUE(status.isOk()) << where << " run " << run << ": " << status.toString();
    EXPECT_EQ(buffer.check(), "") << where << " run " << run;
    EXPECT_LE(plan->peakExtraBytes(), auxBytes + inPlaceBookkeepingBound(comm.size())) << where;
    if (checkPeak) checkPeak(plan->peakExtraBytes());
    env.barrier();
  }
}

class InPlaceCopyThreads : public ::testing::TestWithParam<int> {};

// a = 1 MiB (the default) holds every rank's outgoing data: every block is
// copied, so the peak holds at least the copy.
TEST_P(InPlaceCopyThreads, AllPairsFit) {
  const int size = GetParam();
  runRanks(size, {}, [&](RankEnv& env) {
    auto comm = world(env.context);
    ASSERT_NE(comm, nullptr);
    for (Spread spread : testing::kSpreads) {
      const uint64_t seed = 300 + static_cast<uint64_t>(size) * 7 + static_cast<uint64_t>(spread);
      InPlaceBuffer buffer(testing::countMatrix(spread, size, seed, 500), kItem, env.rank, seed);
      const int64_t outgoing = outgoingBytes(buffer);
      runChecked(env, *comm, buffer, int64_t{1} << 20, 2, testing::spreadName(spread),
                 [&](int64_t peak) { EXPECT_GE(peak, outgoing) << testing::spreadName(spread); });
      if (::testing::Test::HasFatalFailure()) return;
    }
  });
}

// a = one element: nothing is copied (the peak stays under one element
// plus bookkeeping, far below the outgoing data), the algorithm as before.
TEST_P(InPlaceCopyThreads, NoPairFits) {
  const int size = GetParam();
  runRanks(size, {}, [&](RankEnv& env) {
    auto comm = world(env.context);
    ASSERT_NE(comm, nullptr);
    for (Spread spread : {Spread::kRandom, Spread::kOneHugePeer, Spread::kAllEqual}) {
      const uint64_t seed = 400 + static_cast<uint64_t>(size) * 7 + static_cast<uint64_t>(spread);
      InPlaceBuffer buffer(testing::countMatrix(spread, size, seed, 60), kItem, env.rank, seed);
      runChecked(env, *comm, buffer, kItem, 1, testing::spreadName(spread));
      if (::testing::Test::HasFatalFailure()) return;
    }
  });
}

// Each rank its own a, from its own outgoing bytes: even ranks copy all,
// odd ranks one element (so every pair of an even and an odd rank has one
// side that copies and one that does not); then every rank 40 % (some
// blocks copied, smallest first); then every rank one element short of all.
TEST_P(InPlaceCopyThreads, MixedPairs) {
  const int size = GetParam();
  runRanks(size, {}, [&](RankEnv& env) {
    auto comm = world(env.context);
    ASSERT_NE(comm, nullptr);
    const std::function<int64_t(int64_t)> rules[] = {
        [&](int64_t out) { return env.rank % 2 == 0 ? std::max(kItem, out) : kItem; },
        [](int64_t out) { return std::max(kItem, out * 40 / 100); },
        [](int64_t out) { return std::max(kItem, out - kItem); },
    };
    for (Spread spread : testing::kSpreads) {
      for (size_t rule = 0; rule < std::size(rules); ++rule) {
        const uint64_t seed = 500 + static_cast<uint64_t>(size) * 11 + static_cast<uint64_t>(spread) * 3 + rule;
        InPlaceBuffer buffer(testing::countMatrix(spread, size, seed, 400), kItem, env.rank, seed);
        const std::string where = std::string(testing::spreadName(spread)) + " rule " + std::to_string(rule);
        runChecked(env, *comm, buffer, rules[rule](outgoingBytes(buffer)), 1, where);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, InPlaceCopyThreads, ::testing::Values(2, 3, 4, 5, 7),
                         [](const auto& ranks) { return "np" + std::to_string(ranks.param); });

// One rank sends a huge block to one peer (more than its a), small blocks to
// the others (copied); every other rank copies all. Then the counts change:
// a new plan each time on the same communicator, each run three times.
TEST(InPlaceCopy, OneHugePeerAndChangingCounts) {
  constexpr int kSize = 4;
  runRanks(kSize, {}, [&](RankEnv& env) {
    auto comm = world(env.context);
    ASSERT_NE(comm, nullptr);
    for (int64_t huge : {int64_t{20000}, int64_t{0}, int64_t{3000}}) {
      CountMatrix counts(kSize, std::vector<int64_t>(kSize, 0));
      for (int i = 0; i < kSize; ++i) {
        for (int j = 0; j < kSize; ++j) counts[static_cast<size_t>(i)][static_cast<size_t>(j)] = (i * 5 + j * 3) % 7;
      }
      counts[1][2] = huge;
      InPlaceBuffer buffer(counts, kItem, env.rank, static_cast<uint64_t>(huge) + 9);
      runChecked(env, *comm, buffer, 4096, 3, "huge " + std::to_string(huge));
      if (::testing::Test::HasFatalFailure()) return;
    }
  });
}

}  // namespace
}  // namespace ibdt::collectives
