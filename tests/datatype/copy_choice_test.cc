// tests/datatype/copy_choice_test.cc — the large-block kernel choice
// (datatype/block_copy.h, datatype/kernel_trials.h) without timing: which
// regime a call falls in, which kernel injected trial results elect, and that
// a call beyond the core's own cache decides in one call by its chunks while
// every byte, gap and guard of its copies is right.
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "datatype/block_copy.h"
#include "datatype/kernel_trials.h"
#include "ibdt/datatype.h"

namespace ibdt::datatype {
namespace {

constexpr uint8_t kGuard = 0xC3;

TEST(CopyChoice, RegimeCutsAtTheCoresCacheAndTheSharedOne) {
  constexpr int64_t kStream = int64_t{64} << 20, kOwn = int64_t{1} << 20;
  auto regime = [&](int64_t block, int64_t total) { return copyRegimeOf(block, total, kStream, kOwn); };
  EXPECT_EQ(regime(kLargeBlockBytes, kOwn - 1), CopyRegime::kShortInCache);
  EXPECT_EQ(regime(kLongBlockBytes, kOwn - 1), CopyRegime::kLongInCache);
  EXPECT_EQ(regime(kLargeBlockBytes, kOwn), CopyRegime::kBeyondOwnCache);
  EXPECT_EQ(regime(kLongBlockBytes, int64_t{16} << 20), CopyRegime::kBeyondOwnCache);  // the 16 MiB pack
  EXPECT_EQ(regime(kLongBlockBytes, kStream - 1), CopyRegime::kBeyondOwnCache);
  EXPECT_EQ(regime(kLongBlockBytes, kStream), CopyRegime::kBeyondCache);
  EXPECT_EQ(regime(kLargeBlockBytes - 1, kStream), CopyRegime::kSmallBeyondCache);
  // Blocks under 1 KiB never take the kernels between the two cuts.
  EXPECT_EQ(regime(kLargeBlockBytes - 1, kOwn), CopyRegime::kShortInCache);
  // A shared cache no larger than the core's: beyond it wins.
  EXPECT_EQ(copyRegimeOf(kLongBlockBytes, kOwn, kOwn, kOwn), CopyRegime::kBeyondCache);
}

// Hands out the trials and records `nsPerByte[kernel]` for each; the winner.
template <int kKernels>
int elect(KernelTrials<kKernels>& trials, const double (&nsPerByte)[kKernels], int perKernel, int kernels) {
  bool timed = true;
  EXPECT_EQ(trials.next(timed), 0);
  EXPECT_FALSE(timed) << "the first copy is untimed";
  int winner = -1;
  for (int i = 0; i < perKernel * kernels; ++i) {
    const int kernel = trials.next(timed);
    EXPECT_TRUE(timed);
    EXPECT_LT(kernel, kernels) << "only the first " << kernels << " kernels compete";
    EXPECT_EQ(winner, -1) << "decided before the last trial";
    winner = trials.record(kernel, nsPerByte[kernel]);
  }
  EXPECT_EQ(trials.next(timed), 0);
  EXPECT_FALSE(timed) << "no trials left";
  return winner;
}

TEST(CopyChoice, InjectedTrialsKeepMemcpyUnlessAnotherIsClearlyFaster) {
  struct Row {
    double ns[3];
    int kernels, winner;
  };
  for (const Row& row : {Row{{1.0, 0.90, 0.95}, 3, 0},   // within 15 %: memcpy stays
                         Row{{1.0, 0.80, 0.95}, 3, 1},   // vector 20 % faster
                         Row{{1.0, 0.80, 0.70}, 3, 2},   // stream faster still
                         Row{{1.0, 0.80, 0.79}, 3, 1},   // within 3 % of the challenger: no swap
                         Row{{1.0, 0.95, 0.10}, 2, 0},   // stream not among the two: never chosen
                         Row{{0.5, 0.30, 0.20}, 1, 0}}) {
    KernelTrials<3> trials(3, row.kernels);
    EXPECT_EQ(elect(trials, row.ns, 3, row.kernels), row.winner)
        << row.ns[0] << "/" << row.ns[1] << "/" << row.ns[2] << " over " << row.kernels << " kernels";
  }
}

// One trial slower than memcpy's best does not count against a kernel: the
// fastest trial per kernel is compared (a preempted trial is outvoted).
TEST(CopyChoice, InjectedTrialsCompareEachKernelsFastest) {
  KernelTrials<3> trials(2, 2);
  bool timed = false;
  trials.next(timed);
  const double results[] = {1.0, 5.0, 1.1, 0.7};  // memcpy, vector, memcpy, vector
  int winner = -1;
  for (double ns : results) winner = trials.record(trials.next(timed), ns);
  EXPECT_EQ(winner, 1);
}

// A hvector of `blocks` blocks of `bytes`, `stride` apart: packed and
// unpacked through Segment, every packed byte, every block, gap and guard of
// the unpacked buffer checked.
void packAndUnpackChecked(int64_t blocks, int64_t bytes, int64_t stride, uint64_t seed) {
  Datatype type = Datatype::hvector(blocks, bytes, stride, Datatype::of<uint8_t>()).value();
  ASSERT_TRUE(type.commit().isOk());
  auto seg = Segment::create(type, 1);
  ASSERT_TRUE(seg.isOk()) << seg.status().toString();
  ASSERT_EQ(seg->size(), blocks * bytes);
  constexpr int64_t kPad = 64;
  std::vector<uint8_t> typed(static_cast<size_t>(blocks * stride));
  std::mt19937_64 rng(seed);
  for (uint8_t& b : typed) b = static_cast<uint8_t>(rng());
  std::vector<uint8_t> packed(static_cast<size_t>(seg->size() + 2 * kPad), kGuard);
  ASSERT_TRUE(seg->pack(typed.data(), 0, seg->size(), packed.data() + kPad).isOk());
  for (int64_t i = 0; i < kPad; ++i) ASSERT_EQ(packed[static_cast<size_t>(i)], kGuard) << "guard before, " << i;
  for (int64_t i = 0; i < blocks; ++i) {
    ASSERT_EQ(std::memcmp(packed.data() + kPad + i * bytes, typed.data() + i * stride, bytes), 0) << "block " << i;
  }
  for (size_t i = static_cast<size_t>(kPad + seg->size()); i < packed.size(); ++i) ASSERT_EQ(packed[i], kGuard) << i;

  std::vector<uint8_t> back(static_cast<size_t>(blocks * stride + 2 * kPad), kGuard);
  ASSERT_TRUE(seg->unpack(back.data() + kPad, 0, seg->size(), packed.data() + kPad).isOk());
  for (int64_t at = 0; at < static_cast<int64_t>(back.size()); ++at) {
    const int64_t t = at - kPad;
    const bool inBlock = t >= 0 && t < blocks * stride && t % stride < bytes;
    ASSERT_EQ(back[static_cast<size_t>(at)], inBlock ? typed[static_cast<size_t>(t)] : kGuard) << "byte " << t;
  }
}

// A call beyond the core's cache (here 64 KiB) but within the shared one:
// with kTrialChunks blocks its chunks decide, in one call, between memcpy
// and vector for each direction; the in-cache regimes stay undecided. One
// block fewer is a whole-call trial and decides nothing.
TEST(CopyChoice, BeyondTheCoresCacheOneCallOfEnoughBlocksDecides) {
  constexpr int kOwn = static_cast<int>(CopyRegime::kBeyondOwnCache);
  for (int64_t blocks : {kTrialChunks - 1, kTrialChunks, 3 * kTrialChunks + 5}) {
    SCOPED_TRACE(::testing::Message() << blocks << " blocks");
    resetBlockCopyPlanForTesting(/*streamAbove=*/int64_t{1} << 40, /*ownCacheAbove=*/64 * 1024);
    constexpr int64_t kBytes = 4096 + 24, kStride = 2 * 4096 + 8;
    packAndUnpackChecked(blocks, kBytes, kStride, 40 + static_cast<uint64_t>(blocks));
    auto plan = blockCopyPlan();
    ASSERT_TRUE(plan.isOk()) << plan.status().toString();
    for (const DirectionPlan* d : {&plan->pack, &plan->unpack}) {
      EXPECT_EQ(d->decided[kOwn], blocks >= kTrialChunks);
      EXPECT_NE(d->of(CopyRegime::kBeyondOwnCache), BlockKernel::kStream) << "the shared cache keeps the output";
      for (CopyRegime r : {CopyRegime::kShortInCache, CopyRegime::kLongInCache, CopyRegime::kBeyondCache}) {
        EXPECT_FALSE(d->decided[static_cast<int>(r)]) << copyRegimeName(r);
      }
    }
    packAndUnpackChecked(blocks, kBytes, kStride, 90 + static_cast<uint64_t>(blocks));  // the settled kernel
  }
  resetBlockCopyPlanForTesting();
}

}  // namespace
}  // namespace ibdt::datatype
