// The in-place alltoallv with derived (non-dense) receive types, ranks as
// threads over the loopback fabric (docs/alltoallv.md, "In-place with
// derived types"): vector, indexed and struct types with holes, count
// matrices from a seed (random with zeros, one huge peer, all to one, one to
// all, a few peers, all equal), p in {1, 2, 3, 4, 5, 7, 8}, auxiliary memory
// from one element to 100 % of the packed incoming bytes. Every byte of the
// buffer is checked: each incoming block's data bytes, and every hole and
// gap untouched. Also: the peak extra memory bound for 40x larger messages,
// a persistent plan started three times, and layouts whose elements share
// bytes refused before anything is sent.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "collectives/inplace_elements.h"
#include "collectives/inplace_plan_runs.h"
#include "collectives/world.h"

namespace ibdt::collectives {
namespace {

namespace ref = datatype::testing;
using datatype::BasicKind;
using datatype::Datatype;
using messaging::testing::RankEnv;
using messaging::testing::runRanks;
using testing::CountMatrix;
using testing::InPlaceBuffer;
using testing::Side;
using testing::Spread;

Datatype committed(Result<Datatype> type) {
  if (!type.isOk() || !type->commit().isOk()) throw std::runtime_error("building a test type failed");
  return *type;
}

// One element each, with holes: engine type and the independent reference.
std::vector<std::pair<std::string, Side>> derivedElements() {
  const Datatype int32 = Datatype::of<int32_t>();
  const ref::Ref int32Ref = ref::refBasic(BasicKind::kInt32);
  std::vector<std::pair<std::string, Side>> sides;
  sides.emplace_back("vector", testing::vectorSide(1));  // vector(4, 3, 5, int32): 48 of 72 bytes
  const std::vector<int64_t> lengths{2, 1, 3}, displs{0, 3, 7};
  sides.emplace_back("indexed", testing::sideOf(committed(Datatype::indexed(lengths, displs, int32)),
                                                ref::refHindexed(lengths, {0, 12, 28}, int32Ref), 1));
  // {int32 at 0, double at 8, int16 at 20}, resized to 32 bytes: holes inside and after.
  const std::vector<int64_t> fieldLengths{1, 1, 1}, fieldDispls{0, 8, 20};
  auto fields = Datatype::structType(fieldLengths, fieldDispls,
                                     std::vector<Datatype>{int32, Datatype::of<double>(), Datatype::of<int16_t>()});
  const ref::Ref fieldsRef = ref::refStruct(
      fieldLengths, fieldDispls, {int32Ref, ref::refBasic(BasicKind::kDouble), ref::refBasic(BasicKind::kInt16)});
  if (!fields.isOk()) throw std::runtime_error("struct type failed");
  sides.emplace_back("struct",
                     testing::sideOf(committed(Datatype::resized(*fields, 0, 32)), ref::refResized(fieldsRef, 0, 32), 1));
  return sides;
}

class InPlaceDerived : public ::testing::TestWithParam<int> {};

TEST_P(InPlaceDerived, EverySpreadTypeAndAuxiliarySize) {
  const int size = GetParam();
  const auto elements = derivedElements();
  runRanks(size, {}, [&](RankEnv& env) {
    auto comm = testing::world(env.context);
    ASSERT_NE(comm, nullptr);
    for (Spread spread : testing::kSpreads) {
      for (size_t t = 0; t < elements.size(); ++t) {
        const Side& element = elements[t].second;
        const uint64_t seed = 4000 + static_cast<uint64_t>(size) * 19 + static_cast<uint64_t>(spread) * 3 + t;
        const CountMatrix counts = testing::countMatrix(spread, size, seed, 40);
        for (int percent : {0, 1, 10, 100}) {  // 0: one element
          InPlaceBuffer buffer(counts, element, env.rank, seed);
          AlltoallvOptions options;
          options.inplaceBytes =
              std::max(element.bytes(), testing::largestIncoming(counts, element.bytes()) * percent / 100);
          options.inplaceBuffers = percent == 10 ? 3 : 0;
          const std::string where = std::string(testing::spreadName(spread)) + " " + elements[t].first + " aux " +
                                    std::to_string(percent) + "%";
          const int64_t peak = testing::runInPlaceChecked(env, *comm, buffer, element.type, options, 1, where);
          if (::testing::Test::HasFailure()) return;
          EXPECT_LE(peak, testing::inPlacePeakBound(options, size))
              << where;
        }
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, InPlaceDerived, ::testing::Values(1, 2, 3, 4, 5, 7, 8),
                         [](const auto& ranks) { return "np" + std::to_string(ranks.param); });

// The bound whatever the message sizes (auxiliary buffers hold packed
// bytes, not the type's holes), and a persistent plan run three times.
TEST(InPlaceDerivedPlans, PeakDoesNotGrowAndPlansRepeat) {
  const Side element = derivedElements()[2].second;  // struct: 14 of 32 bytes are data
  runRanks(4, {}, [&](RankEnv& env) {
    auto comm = testing::world(env.context);
    ASSERT_NE(comm, nullptr);
    for (int64_t scale : {100, 4000}) {
      const CountMatrix counts = testing::countMatrix(Spread::kRandom, 4, 91, scale);
      InPlaceBuffer buffer(counts, element, env.rank, 91);
      AlltoallvOptions options;
      options.inplaceBytes = 2048;
      const std::string where = "scale " + std::to_string(scale);
      const int64_t peak = testing::runInPlaceChecked(env, *comm, buffer, element.type, options, 3, where);
      EXPECT_LE(peak, 2048 + testing::inPlaceBookkeepingBound(4) + testing::inPlaceInlineBound(4)) << where;
    }
  });
}

// Elements that interleave without sharing a byte are accepted; elements
// (or runs of one element) that share bytes are refused with a reason.
TEST(InPlaceDerivedLayouts, OverlappingElementsAreRefused) {
  const Datatype bytes4 = committed(Datatype::contiguous(4, Datatype::basic(BasicKind::kByte)));
  const std::vector<int64_t> two{1, 1};
  // Runs at 0 and 12, extent 8: element n at 8n and 8n + 12, never shared.
  Datatype interleaved = committed(Datatype::resized(committed(Datatype::hindexed(two, {{0, 12}}, bytes4)), 0, 8));
  EXPECT_TRUE(checkInPlaceLayout(interleaved).isOk()) << checkInPlaceLayout(interleaved).toString();
  // Runs at 0 and 8, extent 4: element 2's first run is element 0's second.
  Datatype shared = committed(Datatype::resized(committed(Datatype::hindexed(two, {{0, 8}}, bytes4)), 0, 4));
  Status refused = checkInPlaceLayout(shared);
  EXPECT_EQ(refused.code(), Code::kInvalidArgument);
  EXPECT_NE(refused.message().find("elements of the recvtype overlap"), std::string::npos) << refused.toString();
  // One element writing bytes 2..3 twice.
  Datatype twice = committed(Datatype::hindexed(two, {{0, 2}}, bytes4));
  EXPECT_NE(checkInPlaceLayout(twice).message().find("twice"), std::string::npos);
  // And through alltoallvInit on one rank, before anything is sent.
  runRanks(1, {}, [&](RankEnv& env) {
    auto comm = testing::world(env.context);
    ASSERT_NE(comm, nullptr);
    std::vector<std::byte> buffer(64);
    const std::vector<int64_t> one{1}, zero{0};
    auto plan = alltoallvInit(*comm, kInPlace, one, zero, Datatype(), buffer.data(), one, zero, shared);
    ASSERT_FALSE(plan.isOk());
    EXPECT_NE(plan.status().message().find("overlap"), std::string::npos) << plan.status().toString();
  });
}

}  // namespace
}  // namespace ibdt::collectives
