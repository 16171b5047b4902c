// The in-place alltoallv's streamed pairs (docs/alltoallv.md, "In-place:
// streamed pairs"), ranks as threads over the loopback fabric: blocks laid
// out by MPI's in-place rule (symmetric counts, each incoming block where
// the outgoing block to the same peer lies) on every rank, so every pair
// streams, or on even ranks only, so pairs with an odd rank keep the phases
// while a rank streams with some peers; count matrices from a seed (random
// with zeros, one huge peer, all to one, one to all, a few peers, all
// equal), p in {1, 2, 3, 4, 5, 7, 8}, int32 and a strided derived type,
// auxiliary memory from one element to 100 %; every byte checked, the peak
// extra memory asserted, a persistent plan run three times. Run twice: with
// the default eager limit every chunk's send completes at once and the
// partner's chunk is received straight into its slots; with a small one
// and no pipelined eager, larger chunks are rendezvous sends, not complete
// when posted, so their partner's chunk goes through the slice.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "collectives/inplace_plan_runs.h"

namespace ibdt::collectives {
namespace {

using messaging::testing::RankEnv;
using testing::CountMatrix;
using testing::InPlaceBuffer;
using testing::Placement;
using testing::Side;

// Chunks above this many packed bytes are rendezvous sends (the minimum the
// messaging layer accepts is smaller).
constexpr int64_t kSmallEagerLimit = 256;

class InPlaceStreams : public ::testing::TestWithParam<int> {};

void everySpreadTypeAndAuxiliarySize(int size, const messaging::Options& messagingOptions) {
  testing::forEverySpreadAndElement(
      size, messagingOptions, 6000,
      [&](RankEnv& env, Communicator& comm, testing::Spread spread, const std::string& name, const Side& element,
          uint64_t seed) {
        const CountMatrix counts =
            testing::symmetric(testing::countMatrix(spread, size, seed, name == "int32" ? 150 : 40));
        for (bool everyRank : {true, false}) {
          const Placement placement = everyRank || env.rank % 2 == 0 ? Placement::kSame : Placement::kIndependent;
          for (int percent : {0, 1, 10, 100}) {  // 0: one element
            InPlaceBuffer buffer(counts, element, env.rank, seed, placement);
            AlltoallvOptions options;
            options.inplaceBytes =
                std::max(element.bytes(), testing::largestIncoming(counts, element.bytes()) * percent / 100);
            const std::string where = std::string(testing::spreadName(spread)) + " " + name +
                                      (everyRank ? " every rank" : " even ranks") + " aux " +
                                      std::to_string(percent) + "%";
            const int64_t peak =
                testing::runInPlaceChecked(env, comm, buffer, element.type, options, percent == 1 ? 2 : 1, where);
            if (::testing::Test::HasFailure()) return;
            EXPECT_LE(peak, testing::inPlacePeakBound(options, size)) << where;
          }
        }
      });
}

TEST_P(InPlaceStreams, EverySpreadTypeAndAuxiliarySize) { everySpreadTypeAndAuxiliarySize(GetParam(), {}); }

TEST_P(InPlaceStreams, RendezvousChunksGoThroughTheSlice) {
  messaging::Options options;
  options.eagerLimit = kSmallEagerLimit;
  options.pipelineLimit = 0;
  everySpreadTypeAndAuxiliarySize(GetParam(), options);
}

INSTANTIATE_TEST_SUITE_P(Ranks, InPlaceStreams, ::testing::Values(1, 2, 3, 4, 5, 7, 8),
                         [](const auto& ranks) { return "np" + std::to_string(ranks.param); });

}  // namespace
}  // namespace ibdt::collectives
