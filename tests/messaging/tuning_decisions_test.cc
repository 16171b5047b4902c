// The limits a tuning file decides (transport/messaging/tuning_decisions.h):
// computed by hand from synthetic fits, deterministic, with the built-in
// value kept when the file lacks the paths.
#include "transport/messaging/tuning_decisions.h"

#include <gtest/gtest.h>

namespace ibdt::messaging {
namespace {

Tuning withContig(PathCost pipelinedContig, PathCost contig) {
  Tuning tuning;
  tuning.minBytes = 65536;
  tuning.maxBytes = 1 << 20;
  tuning.cost(TunedPath::kPipelinedContig) = pipelinedContig;
  tuning.cost(TunedPath::kContig) = contig;
  return tuning;
}

constexpr int64_t kEager = 32768;

TEST(ExchangeZeroCopyMin, IsTheCrossoverOfTheTwoFits) {
  // The pipelined per-byte cost counts twice in an exchange (both copies on one core).
  // 2000 + 2 x 2 b = 20000 + 0.5 b at b = 5143: below the eager limit, so from the eager limit up.
  EXPECT_EQ(tunedExchangeZeroCopyMin(withContig({true, 2000, 2, 0}, {true, 20000, 0.5, 0}), kEager, 65536), kEager);
  // 1000 + 2 x 0.5 b = 101000 + 0.5 b at b = 200000.
  EXPECT_EQ(tunedExchangeZeroCopyMin(withContig({true, 1000, 0.5, 0}, {true, 101000, 0.5, 0}), kEager, 65536),
            200000);
  // Crossing at 200000.5: rounded up, the first size where single-copy wins.
  EXPECT_EQ(tunedExchangeZeroCopyMin(withContig({true, 1000, 0.5, 0}, {true, 101000.25, 0.5, 0}), kEager, 65536),
            200001);
  // Without the doubling these fits would never cross (pipelined 0.375 ns/B < single 0.5).
  EXPECT_EQ(tunedExchangeZeroCopyMin(withContig({true, 1000, 0.375, 0}, {true, 23500, 0.5, 0}), kEager, 65536), 90000);
}

TEST(ExchangeZeroCopyMin, OffWhenPipelinedWinsEverywhereMeasured) {
  EXPECT_EQ(tunedExchangeZeroCopyMin(withContig({true, 1000, 0.1, 0}, {true, 20000, 0.5, 0}), kEager, 65536), 0);
  // Crossing beyond the largest size measured (1 MiB): not extrapolated.
  EXPECT_EQ(tunedExchangeZeroCopyMin(withContig({true, 1000, 0.5, 0}, {true, 2e6, 0.5, 0}), kEager, 65536), 0);
}

TEST(ExchangeZeroCopyMin, KeepsTheBuiltInValueWithoutBothPaths) {
  Tuning tuning = withContig({true, 1000, 1, 0}, {});
  EXPECT_EQ(tunedExchangeZeroCopyMin(tuning, kEager, 65536), 65536);
  EXPECT_EQ(tunedExchangeZeroCopyMin(Tuning{}, kEager, 12345), 12345);
}

TEST(Throttle, CoversTheFixedCostByTheOthersInFlight) {
  const Tuning tuning = withContig({true, 500, 1, 0}, {true, 20000, 0.5, 0});
  // 64 KiB: 20000 / (0.5 x 65536) = 0.61 -> 1 + 1 = 2.
  EXPECT_EQ(tunedThrottle(tuning, 65536, kEager, 8), 2);
  // 1000 bytes (eager): 500 / (1 x 1000) -> 1 + 1 = 2; 100 bytes: 1 + 5 = 6.
  EXPECT_EQ(tunedThrottle(tuning, 1000, kEager, 8), 2);
  EXPECT_EQ(tunedThrottle(tuning, 100, kEager, 8), 6);
  // 1 byte: 501 -> clamped to 64.
  EXPECT_EQ(tunedThrottle(tuning, 1, kEager, 8), 64);
  EXPECT_EQ(tunedThrottle(Tuning{}, 65536, kEager, 8), 8);
}

}  // namespace
}  // namespace ibdt::messaging
