// The in-place alltoallv's overlapped phases (docs/alltoallv.md, "In-place:
// overlapped phases"), ranks as threads over the loopback fabric. Blocks
// are placed independently (not MPI's in-place layout), so no pair streams
// and every item goes through the phases; auxiliary memory of one to a few
// elements in one, two or p shared buffers makes hundreds of phases, each
// phase's requests computed while the previous phase's data is in flight
// (held items, buffers claimed by another peer, in-place runs above a
// pending one). Count matrices from a seed in every spread, p in
// {2, 3, 4, 5, 7, 8}, int32 and a strided derived type, each plan run
// twice; every byte checked and the peak extra memory asserted.
#include <gtest/gtest.h>

#include <string>

#include "collectives/inplace_plan_runs.h"
#include "ibdt/collectives.h"

namespace ibdt::collectives {
namespace {

using messaging::testing::RankEnv;
using testing::CountMatrix;
using testing::InPlaceBuffer;
using testing::Side;

class InPlaceOverlap : public ::testing::TestWithParam<int> {};

TEST_P(InPlaceOverlap, TinySharedAuxiliaryManyPhases) {
  const int size = GetParam();
  testing::forEverySpreadAndElement(
      size, {}, 9100,
      [&](RankEnv& env, Communicator& comm, testing::Spread spread, const std::string& name, const Side& element,
          uint64_t seed) {
        const CountMatrix counts = testing::countMatrix(spread, size, seed, name == "int32" ? 120 : 40);
        for (int64_t items : {1, 3, 16}) {
          for (int64_t buffers : {int64_t{1}, int64_t{2}, int64_t{size}}) {
            InPlaceBuffer buffer(counts, element, env.rank, seed);
            AlltoallvOptions options;
            options.inplaceBytes = items * element.bytes();
            options.inplaceBuffers = buffers;
            const std::string where = std::string(testing::spreadName(spread)) + " " + name + " aux " +
                                      std::to_string(items) + " elements in " + std::to_string(buffers);
            const int64_t peak = testing::runInPlaceChecked(env, comm, buffer, element.type, options, 2, where);
            if (::testing::Test::HasFailure()) return;
            EXPECT_LE(peak, testing::inPlacePeakBound(options, size)) << where;
          }
        }
      });
}

INSTANTIATE_TEST_SUITE_P(Ranks, InPlaceOverlap, ::testing::Values(2, 3, 4, 5, 7, 8),
                         [](const auto& ranks) { return "np" + std::to_string(ranks.param); });

}  // namespace
}  // namespace ibdt::collectives
