// The in-place alltoallv's streamed pairs (docs/alltoallv.md, "In-place:
// streamed pairs"), ranks as threads over the loopback fabric: blocks laid
// out by MPI's in-place rule (symmetric counts, each incoming block where
// the outgoing block to the same peer lies) on every rank, so every pair
// streams, or on even ranks only, so pairs with an odd rank keep the phases
// while a rank streams with some peers; count matrices from a seed (random
// with zeros, one huge peer, all to one, one to all, a few peers, all
// equal), p in {1, 2, 3, 4, 5, 7, 8}, int32 and a strided derived type,
// auxiliary memory from one element to 100 %; every byte checked, the peak
// extra memory asserted, a persistent plan run three times.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "collectives/alltoallv_data.h"
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
using testing::Placement;
using testing::Side;
using testing::Spread;
using testing::world;

// As alltoallv_thread_test.cc, plus inline blocks on top of a tiny a.
int64_t extraBound(int size) { return 4096 + 1024 * int64_t{size} + 2 * (size - 1) * 256; }

std::vector<std::pair<std::string, Side>> elements() {
  return {{"int32", testing::sideOf(Datatype::of<int32_t>(),
                                    datatype::testing::refBasic(datatype::BasicKind::kInt32), 1)},
          {"vector", testing::vectorSide(1)}};
}

int64_t largestIncoming(const CountMatrix& counts, int64_t elementBytes) {
  int64_t largest = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    int64_t total = 0;
    for (const auto& row : counts) total += row[r] * elementBytes;
    largest = std::max(largest, total);
  }
  return largest;
}

// One plan over `buffer`, started `runs` times with fresh data each time.
void runChecked(RankEnv& env, Communicator& comm, InPlaceBuffer& buffer, const Side& element,
                const AlltoallvOptions& options, int runs, const std::string& where) {
  auto plan = alltoallvInit(comm, kInPlace, buffer.sendcounts(), buffer.sdispls(), Datatype(), buffer.buffer(),
                            buffer.recvcounts(), buffer.rdispls(), element.type, options);
  ASSERT_TRUE(plan.isOk()) << where << ": " << plan.status().toString();
  for (int run = 0; run < runs; ++run) {
    buffer.refill();
    env.barrier();  // every buffer is ready before anyone's run writes into it
    ASSERT_TRUE(plan->start().isOk());
    Status status = plan->wait(soon());
    ASSERT_TRUE(status.isOk()) << where << " run " << run << ": " << status.toString();
    EXPECT_EQ(buffer.check(), "") << where << " run " << run;
    env.barrier();
  }
  EXPECT_LE(plan->peakExtraBytes(), options.inplaceBytes + extraBound(comm.size())) << where;
}

class InPlaceStreams : public ::testing::TestWithParam<int> {};

TEST_P(InPlaceStreams, EverySpreadTypeAndAuxiliarySize) {
  const int size = GetParam();
  const auto types = elements();
  runRanks(size, {}, [&](RankEnv& env) {
    auto comm = world(env.context);
    ASSERT_NE(comm, nullptr);
    for (Spread spread : testing::kSpreads) {
      for (size_t t = 0; t < types.size(); ++t) {
        const Side& element = types[t].second;
        const uint64_t seed = 6000 + static_cast<uint64_t>(size) * 23 + static_cast<uint64_t>(spread) * 5 + t;
        const CountMatrix counts = testing::symmetric(testing::countMatrix(spread, size, seed, t == 0 ? 150 : 40));
        for (bool everyRank : {true, false}) {
          const Placement placement = everyRank || env.rank % 2 == 0 ? Placement::kSame : Placement::kIndependent;
          for (int percent : {0, 1, 10, 100}) {  // 0: one element
            InPlaceBuffer buffer(counts, element, env.rank, seed, placement);
            AlltoallvOptions options;
            options.inplaceBytes =
                std::max(element.bytes(), largestIncoming(counts, element.bytes()) * percent / 100);
            const std::string where = std::string(testing::spreadName(spread)) + " " + types[t].first +
                                      (everyRank ? " every rank" : " even ranks") + " aux " +
                                      std::to_string(percent) + "%";
            runChecked(env, *comm, buffer, element, options, percent == 1 ? 2 : 1, where);
            if (::testing::Test::HasFatalFailure()) return;
          }
        }
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, InPlaceStreams, ::testing::Values(1, 2, 3, 4, 5, 7, 8),
                         [](const auto& ranks) { return "np" + std::to_string(ranks.param); });

}  // namespace
}  // namespace ibdt::collectives
