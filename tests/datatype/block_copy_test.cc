// tests/datatype/block_copy_test.cc — every large-block copy kernel
// (datatype/block_copy.h), in cache and beyond it, against the reference
// type-map interpreter, byte for byte, with guard bytes on both buffers.
#include <algorithm>
#include <cstring>
#include <cstdlib>
#include <iterator>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "datatype/block_copy.h"
#include "datatype/block64_gather.h"
#include "datatype/same_set_scatter.h"
#include "ibdt/datatype.h"
#include "reference.h"

namespace ibdt::datatype {
namespace {

using testing::Ref;

constexpr uint8_t kGuard = 0x5A;
constexpr int64_t kGuardBytes = 96;  // guard bytes, also room to misalign the base

struct Case {
  Datatype type;
  Ref ref;
  int64_t count;
};

// Block sizes on both sides of the thresholds: the beyond-cache and the
// large-block cuts and the kernels' 16-byte stores and 64-byte iterations.
constexpr int64_t kStraddling[] = {kBeyondCacheMinBlockBytes - 1, kBeyondCacheMinBlockBytes,
                                   kBeyondCacheMinBlockBytes + 1, kLargeBlockBytes - 1, kLargeBlockBytes,     kLargeBlockBytes + 1,
                                   kLargeBlockBytes + 15, kLargeBlockBytes + 63, kLargeBlockBytes + 64,
                                   kLargeBlockBytes + 65, 4095,                 4096,
                                   4097};

// Large blocks of bytes or doubles, as a vector (strided runs) or an
// indexed-block type (runs at displacements), odd sizes included; shapes 4
// and 5 take byte blocks of a kStraddling size.
// blocks > 0: that many blocks instead of a random 1-40.
Case makeCase(std::mt19937_64& rng, int shape, int64_t blocks = 0) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const bool straddling = shape >= 4;
  shape %= 4;
  const bool doubles = shape % 2 == 0 && !straddling;
  const Datatype elem = doubles ? Datatype::of<double>() : Datatype::of<uint8_t>();
  const Ref refElem = testing::refBasic(doubles ? BasicKind::kDouble : BasicKind::kUint8);
  const int64_t elemBytes = doubles ? 8 : 1;
  const int64_t blocklen = straddling ? kStraddling[pick(0, std::size(kStraddling) - 1)]
                                      : pick(kLargeBlockBytes, 9000) / elemBytes;
  const int64_t blockBytes = blocklen * elemBytes;
  if (blocks <= 0) blocks = pick(1, 40);
  Case c;
  c.count = pick(1, 3);
  if (shape < 2) {
    const int64_t stride = blockBytes + pick(0, 5000);
    c.type = Datatype::hvector(blocks, blocklen, stride, elem).value();
    c.ref = testing::refHvector(blocks, blocklen, stride, refElem);
  } else {
    std::vector<int64_t> displs;
    int64_t at = 0;
    for (int64_t i = 0; i < blocks; ++i, at += blockBytes + pick(1, 3000)) displs.push_back(at);
    std::shuffle(displs.begin(), displs.end(), rng);
    c.type = Datatype::hindexedBlock(blocklen, displs, elem).value();
    c.ref = testing::refHindexed(std::vector<int64_t>(displs.size(), blocklen), displs, refElem);
  }
  EXPECT_TRUE(c.type.commit().isOk());
  return c;
}

// `packedAlign`: the packed buffer's misalignment and the cut between the
// two packs are multiples of it (16-byte aligned when it is).
void checkPackUnpack(const Case& c, std::mt19937_64& rng, int64_t packedAlign = 1) {
  const std::vector<int64_t> offsets = testing::refByteOffsets(c.ref, c.count);
  const int64_t size = static_cast<int64_t>(offsets.size());
  int64_t hi = 0;
  for (int64_t o : offsets) hi = std::max(hi, o + 1);
  const int64_t typedMisalign = static_cast<int64_t>(rng() % 64);
  const int64_t packedMisalign = static_cast<int64_t>(rng() % 64) / packedAlign * packedAlign;
  std::vector<uint8_t> typed(static_cast<size_t>(hi + 2 * kGuardBytes), kGuard);
  uint8_t* base = typed.data() + typedMisalign;
  for (int64_t o : offsets) base[o] = static_cast<uint8_t>(rng());
  auto seg = Segment::create(c.type, c.count);
  ASSERT_TRUE(seg.isOk()) << seg.status().toString();
  ASSERT_EQ(seg->size(), size);

  std::vector<uint8_t> packed(static_cast<size_t>(size + 2 * kGuardBytes), kGuard);
  uint8_t* out = packed.data() + packedMisalign;
  const int64_t cut = size == 0 ? 0 : static_cast<int64_t>(rng() % static_cast<uint64_t>(size)) / packedAlign * packedAlign;
  ASSERT_TRUE(seg->pack(base, 0, cut, out).isOk());
  ASSERT_TRUE(seg->pack(base, cut, size, out + cut).isOk());
  for (int64_t i = 0; i < size; ++i) ASSERT_EQ(out[i], base[offsets[static_cast<size_t>(i)]]) << "packed byte " << i;
  for (int64_t i = 0; i < packedMisalign; ++i) ASSERT_EQ(packed[static_cast<size_t>(i)], kGuard);
  for (size_t i = static_cast<size_t>(packedMisalign + size); i < packed.size(); ++i) ASSERT_EQ(packed[i], kGuard);

  std::vector<uint8_t> back(typed.size(), kGuard);
  uint8_t* backBase = back.data() + typedMisalign;
  ASSERT_TRUE(seg->unpack(backBase, 0, size, out).isOk());
  std::vector<bool> covered(back.size(), false);
  for (int64_t o : offsets) covered[static_cast<size_t>(typedMisalign + o)] = true;
  for (size_t i = 0; i < back.size(); ++i) {
    ASSERT_EQ(back[i], covered[i] ? typed[i] : kGuard) << "typed byte " << i;
  }
}

void checkManyTypes(uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int k = 0; k < 72; ++k) {
    SCOPED_TRACE(::testing::Message() << "case " << k);
    checkPackUnpack(makeCase(rng, k % 6), rng);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

class ForcedKernel : public ::testing::TestWithParam<int> {
 protected:
  void TearDown() override { resetBlockCopyPlanForTesting(); }
};

TEST_P(ForcedKernel, InCacheAndBeyondMatchTheReference) {
  const auto kernel = static_cast<BlockKernel>(GetParam());
  if (!blockKernelAvailable(kernel)) GTEST_SKIP() << blockKernelName(kernel) << " not built on this architecture";
  BlockCopyPlan plan;
  std::fill(std::begin(plan.pack.kernel), std::end(plan.pack.kernel), kernel);
  plan.unpack = plan.pack;
  plan.streamAbove = int64_t{1} << 40;  // every copy "in cache"
  setBlockCopyPlanForTesting(plan);
  checkManyTypes(11);
  plan.streamAbove = kLargeBlockBytes;  // every copy "beyond the cache"
  for (DirectionPlan* d : {&plan.pack, &plan.unpack}) {
    d->kernel[static_cast<int>(CopyRegime::kShortInCache)] = BlockKernel::kMemcpy;
    d->kernel[static_cast<int>(CopyRegime::kLongInCache)] = BlockKernel::kMemcpy;
  }
  setBlockCopyPlanForTesting(plan);
  checkManyTypes(12);
}

INSTANTIATE_TEST_SUITE_P(Kernels, ForcedKernel, ::testing::Range(0, kBlockKernelCount),
                         [](const ::testing::TestParamInfo<int>& param) {
                           return std::string(blockKernelName(static_cast<BlockKernel>(param.param)));
                         });

// Every regime of both directions decides from its own trials, each copy
// checked, in cache (short and long blocks) and beyond it.
TEST(BlockCopy, AutomaticPlanDecidesEveryRegimeByTrials) {
  for (int64_t streamAbove : {int64_t{1} << 40, kLargeBlockBytes}) {
    resetBlockCopyPlanForTesting(streamAbove);
    checkManyTypes(13);  // data first: copies during the trials and after the decisions
    auto plan = blockCopyPlan();
    ASSERT_TRUE(plan.isOk()) << plan.status().toString();
    EXPECT_FALSE(plan->forced);
    std::vector<CopyRegime> regimes = {CopyRegime::kBeyondCache};
    if (streamAbove > kLargeBlockBytes) regimes = {CopyRegime::kShortInCache, CopyRegime::kLongInCache};
    for (const DirectionPlan* d : {&plan->pack, &plan->unpack}) {
      for (CopyRegime r : regimes) {
        EXPECT_TRUE(d->decided[static_cast<int>(r)]) << copyRegimeName(r) << ": 72 types are more than the trials";
        EXPECT_TRUE(blockKernelAvailable(d->of(r)));
      }
    }
  }
  resetBlockCopyPlanForTesting();
}

// Packing and unpacking decide beyond the cache separately: copies in one
// direction run (and end) that direction's trials only.
TEST(BlockCopy, EachDirectionRunsItsOwnTrials) {
  resetBlockCopyPlanForTesting(/*streamAbove=*/kLargeBlockBytes);
  constexpr int64_t kBlocks = 8, kBytes = 4096 + 17, kStride = 3 * 4096;
  Datatype type = Datatype::hvector(kBlocks, kBytes, kStride, Datatype::of<uint8_t>()).value();
  ASSERT_TRUE(type.commit().isOk());
  auto seg = Segment::create(type, 1);
  ASSERT_TRUE(seg.isOk()) << seg.status().toString();
  std::vector<uint8_t> typed(static_cast<size_t>(kBlocks * kStride)), packed(static_cast<size_t>(seg->size()));
  std::mt19937_64 rng(15);
  for (uint8_t& b : typed) b = static_cast<uint8_t>(rng());
  for (int call = 0; call < 40; ++call) ASSERT_TRUE(seg->pack(typed.data(), 0, seg->size(), packed.data()).isOk());
  for (int64_t i = 0; i < kBlocks; ++i) {
    ASSERT_EQ(std::memcmp(packed.data() + i * kBytes, typed.data() + i * kStride, kBytes), 0) << "block " << i;
  }
  auto plan = blockCopyPlan();
  ASSERT_TRUE(plan.isOk()) << plan.status().toString();
  constexpr int kBeyond = static_cast<int>(CopyRegime::kBeyondCache);
  EXPECT_TRUE(plan->pack.decided[kBeyond]);
  EXPECT_FALSE(plan->unpack.decided[kBeyond]) << "no unpack has run";
  EXPECT_FALSE(plan->pack.decided[static_cast<int>(CopyRegime::kLongInCache)]) << "no copy was in cache";
  std::vector<uint8_t> back(typed.size(), 0);
  for (int call = 0; call < 40; ++call) ASSERT_TRUE(seg->unpack(back.data(), 0, seg->size(), packed.data()).isOk());
  for (int64_t i = 0; i < kBlocks; ++i) {
    ASSERT_EQ(std::memcmp(back.data() + i * kStride, typed.data() + i * kStride, kBytes), 0) << "block " << i;
  }
  plan = blockCopyPlan();
  ASSERT_TRUE(plan.isOk());
  EXPECT_TRUE(plan->unpack.decided[kBeyond]);
  resetBlockCopyPlanForTesting();
}

// In cache only memcpy and vector compete (block_copy.cc says why): after
// the trials of both in-cache regimes, neither direction holds stream.
TEST(BlockCopy, InCacheTrialsNeverChooseStream) {
  resetBlockCopyPlanForTesting(int64_t{1} << 40);
  checkManyTypes(16);
  auto plan = blockCopyPlan();
  ASSERT_TRUE(plan.isOk()) << plan.status().toString();
  for (const DirectionPlan* d : {&plan->pack, &plan->unpack}) {
    for (CopyRegime r : {CopyRegime::kShortInCache, CopyRegime::kLongInCache}) {
      ASSERT_TRUE(d->decided[static_cast<int>(r)]) << copyRegimeName(r);
      EXPECT_NE(d->of(r), BlockKernel::kStream) << copyRegimeName(r);
    }
  }
  resetBlockCopyPlanForTesting();
}

// Beyond the cache, a call of kTrialChunks blocks or more runs every trial
// on its own chunks and decides; one block fewer is a whole-call trial (the
// first call of a regime is the untimed one) and does not.
TEST(BlockCopy, BeyondTheCacheOneCallOfEnoughBlocksDecides) {
  for (int64_t blocks : {kTrialChunks - 1, kTrialChunks}) {
    SCOPED_TRACE(::testing::Message() << blocks << " blocks");
    resetBlockCopyPlanForTesting(/*streamAbove=*/kLargeBlockBytes);
    constexpr int64_t kBytes = 2048 + 40, kStride = 2 * 4096;
    Datatype type = Datatype::hvector(blocks, kBytes, kStride, Datatype::of<uint8_t>()).value();
    ASSERT_TRUE(type.commit().isOk());
    auto seg = Segment::create(type, 1);
    ASSERT_TRUE(seg.isOk()) << seg.status().toString();
    std::vector<uint8_t> typed(static_cast<size_t>(blocks * kStride)), packed(static_cast<size_t>(seg->size()) + 64, kGuard);
    std::mt19937_64 rng(17);
    for (uint8_t& b : typed) b = static_cast<uint8_t>(rng());
    ASSERT_TRUE(seg->pack(typed.data(), 0, seg->size(), packed.data()).isOk());
    for (int64_t i = 0; i < blocks; ++i) {
      ASSERT_EQ(std::memcmp(packed.data() + i * kBytes, typed.data() + i * kStride, kBytes), 0) << "block " << i;
    }
    for (size_t i = static_cast<size_t>(seg->size()); i < packed.size(); ++i) ASSERT_EQ(packed[i], kGuard) << i;
    auto plan = blockCopyPlan();
    ASSERT_TRUE(plan.isOk()) << plan.status().toString();
    constexpr int kBeyond = static_cast<int>(CopyRegime::kBeyondCache);
    EXPECT_EQ(plan->pack.decided[kBeyond], blocks >= kTrialChunks);
    EXPECT_FALSE(plan->unpack.decided[kBeyond]) << "no unpack has run";
  }
  resetBlockCopyPlanForTesting();
}

// Beyond the cache, blocks from kBeyondCacheMinBlockBytes take the kernels
// (their own regime, decided by one call's chunks); one byte shorter, or a
// call that stays in cache, keeps the plain loops and decides nothing.
TEST(BlockCopy, BlocksFromTheBeyondCacheMinimumTakeTheKernelsBeyondTheCache) {
  constexpr int kSmallBeyond = static_cast<int>(CopyRegime::kSmallBeyondCache);
  struct Shape {
    int64_t bytes, blocks;
    bool decides;
  };
  constexpr int64_t kStreamAbove = 64 * 1024;
  for (Shape shape : {Shape{kBeyondCacheMinBlockBytes - 1, 400, false}, Shape{kBeyondCacheMinBlockBytes, 400, true},
                      Shape{kLargeBlockBytes - 1, 80, true}, Shape{kBeyondCacheMinBlockBytes, 100, false}}) {
    SCOPED_TRACE(::testing::Message() << shape.blocks << " blocks of " << shape.bytes);
    resetBlockCopyPlanForTesting(kStreamAbove);
    const int64_t stride = shape.bytes + 3 * 64 + 5;
    Datatype type = Datatype::hvector(shape.blocks, shape.bytes, stride, Datatype::of<uint8_t>()).value();
    ASSERT_TRUE(type.commit().isOk());
    auto seg = Segment::create(type, 1);
    ASSERT_TRUE(seg.isOk()) << seg.status().toString();
    ASSERT_EQ(seg->size() >= kStreamAbove, shape.blocks * shape.bytes >= kStreamAbove);
    std::vector<uint8_t> typed(static_cast<size_t>(shape.blocks * stride)), packed(static_cast<size_t>(seg->size()) + 64, kGuard);
    std::mt19937_64 rng(19);
    for (uint8_t& b : typed) b = static_cast<uint8_t>(rng());
    ASSERT_TRUE(seg->pack(typed.data(), 0, seg->size(), packed.data()).isOk());
    for (int64_t i = 0; i < shape.blocks; ++i) {
      ASSERT_EQ(std::memcmp(packed.data() + i * shape.bytes, typed.data() + i * stride, shape.bytes), 0) << "block " << i;
    }
    for (size_t i = static_cast<size_t>(seg->size()); i < packed.size(); ++i) ASSERT_EQ(packed[i], kGuard) << i;
    std::vector<uint8_t> back(typed.size() + 64, kGuard);
    ASSERT_TRUE(seg->unpack(back.data(), 0, seg->size(), packed.data()).isOk());
    for (int64_t i = 0; i < shape.blocks; ++i) {
      ASSERT_EQ(std::memcmp(back.data() + i * stride, typed.data() + i * stride, shape.bytes), 0) << "block " << i;
      for (int64_t gap = i * stride + shape.bytes; gap < (i + 1) * stride; ++gap) {
        ASSERT_EQ(back[static_cast<size_t>(gap)], kGuard) << "gap byte " << gap;
      }
    }
    auto plan = blockCopyPlan();
    ASSERT_TRUE(plan.isOk()) << plan.status().toString();
    EXPECT_EQ(plan->pack.decided[kSmallBeyond], shape.decides);
    EXPECT_EQ(plan->unpack.decided[kSmallBeyond], shape.decides);
  }
  resetBlockCopyPlanForTesting();
}

// Chunked trials on random vector and indexed-block types whose block
// counts straddle kTrialChunks and leave a short last chunk, each copy
// checked against the reference with guard bytes, while the trials run
// (reset per count) and after they decided.
TEST(BlockCopy, ChunkedTrialsMatchTheReference) {
  std::mt19937_64 rng(18);
  for (int64_t blocks : {kTrialChunks - 1, kTrialChunks, kTrialChunks + 1, 2 * kTrialChunks + 1, 3 * kTrialChunks - 1,
                         5 * kTrialChunks + 7}) {
    resetBlockCopyPlanForTesting(/*streamAbove=*/kLargeBlockBytes);
    for (int k = 0; k < 12; ++k) {
      SCOPED_TRACE(::testing::Message() << blocks << " blocks, case " << k);
      checkPackUnpack(makeCase(rng, k % 6, blocks), rng);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  resetBlockCopyPlanForTesting();
}

TEST(BlockCopy, ForcedByTheKnobAndABadValueIsAnErrorThatStillCopies) {
  ASSERT_EQ(setenv("IBDT_PACK_COPY", "stream", 1), 0);
  resetBlockCopyPlanForTesting();
  auto plan = blockCopyPlan();
  ASSERT_TRUE(plan.isOk()) << plan.status().toString();
  EXPECT_TRUE(plan->forced);
  if (blockKernelAvailable(BlockKernel::kStream)) {
    for (const DirectionPlan* d : {&plan->pack, &plan->unpack}) {
      for (int r = 0; r < kCopyRegimeCount; ++r) EXPECT_EQ(d->kernel[r], BlockKernel::kStream);
    }
  }

  ASSERT_EQ(setenv("IBDT_PACK_COPY", "fastest", 1), 0);
  resetBlockCopyPlanForTesting();
  auto bad = blockCopyPlan();
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().toString().find("IBDT_PACK_COPY"), std::string::npos) << bad.status().toString();
  checkManyTypes(14);  // memcpy, the fallback, loses nothing
  ASSERT_EQ(unsetenv("IBDT_PACK_COPY"), 0);
  resetBlockCopyPlanForTesting();
}

// Small runs at 4 KiB-multiple strides (the same-set scatter when
// unpacking), with sizes on both sides of kSameSetMaxBytes and strides just
// off a multiple (the ordinary loops), as a vector of bytes or of ints.
Case makeSameSetCase(std::mt19937_64& rng) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const bool ints = pick(0, 1) == 1;
  const int64_t elemBytes = ints ? 4 : 1;
  const int64_t blocklen = pick(1, (kSameSetMaxBytes + 8) / elemBytes);
  const int64_t stride = kSameSetStride * pick(1, 4) + (pick(0, 3) == 0 ? pick(-3, 3) * elemBytes : 0);
  const int64_t blocks = pick(kSameSetMinRuns - 2, 80);
  Case c;
  c.count = pick(1, 2);
  const Datatype elem = ints ? Datatype::of<int32_t>() : Datatype::of<uint8_t>();
  c.type = Datatype::hvector(blocks, blocklen, stride, elem).value();
  c.ref = testing::refHvector(blocks, blocklen, stride, testing::refBasic(ints ? BasicKind::kInt32 : BasicKind::kUint8));
  EXPECT_TRUE(c.type.commit().isOk());
  return c;
}

class SameSetScatter : public ::testing::TestWithParam<int> {
 protected:
  void TearDown() override { setSameSetScatterForTesting(-1); }
};

// Each scatter loop forced (and -1: the trials, then their choice) against
// the reference interpreter.
TEST_P(SameSetScatter, MatchesTheReference) {
  const int kernel = GetParam();
  if (kernel >= 0 && !scatterKernelAvailable(static_cast<ScatterKernel>(kernel))) GTEST_SKIP();
  setSameSetScatterForTesting(kernel);
  std::mt19937_64 rng(21 + static_cast<uint64_t>(kernel + 1));
  for (int k = 0; k < 80; ++k) {
    SCOPED_TRACE(::testing::Message() << "case " << k);
    checkPackUnpack(makeSameSetCase(rng), rng);
    if (::testing::Test::HasFatalFailure()) return;
  }
  if (kernel < 0) {
    EXPECT_GE(sameSetScatterDecision(), 0) << "80 unpacks are more than the trials";
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, SameSetScatter, ::testing::Values(-1, 0, 1),
                         [](const ::testing::TestParamInfo<int>& param) {
                           return param.param < 0 ? std::string("trials")
                                                  : std::string(scatterKernelName(static_cast<ScatterKernel>(param.param)));
                         });

// 64-byte blocks packed in calls beyond the core's cache (block64_gather.h;
// the cuts moved to 4 and 16 KiB so that small calls take both regimes): block counts
// around the unrolling, the prefetch distance and the trial chunks, strides
// from dense to pages, 63- and 65-byte blocks beside (the ordinary loops).
Case makeGatherCase(std::mt19937_64& rng) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  constexpr int64_t kCounts[] = {1, 3, 4, 5, 19, 20, 21, 31, 32, 33, 64, 65, 97, 300};
  const int64_t blockBytes = pick(0, 5) == 0 ? kGatherBlockBytes + pick(-1, 1) : kGatherBlockBytes;
  const int64_t blocks = kCounts[pick(0, std::size(kCounts) - 1)];
  const int64_t stride = blockBytes + (pick(0, 3) == 0 ? pick(0, 5000) : pick(0, 2) * 64);
  Case c;
  c.count = pick(1, 2);
  c.type = Datatype::hvector(blocks, blockBytes, stride, Datatype::of<uint8_t>()).value();
  c.ref = testing::refHvector(blocks, blockBytes, stride, testing::refBasic(BasicKind::kUint8));
  EXPECT_TRUE(c.type.commit().isOk());
  return c;
}

class Block64Gather : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { resetBlockCopyPlanForTesting(16384, 4096); }
  void TearDown() override {
    setBlock64GatherForTesting(-1);
    resetBlockCopyPlanForTesting();
  }
};

// Each gather loop forced (and -1: the trials, then their choice) against
// the reference interpreter, every packed byte and guard (misaligned
// packed buffers included: streamed stores take the plain loop there).
TEST_P(Block64Gather, MatchesTheReference) {
  const int kernel = GetParam();
  if (kernel >= 0 && !gatherKernelAvailable(static_cast<GatherKernel>(kernel))) GTEST_SKIP();
  setBlock64GatherForTesting(kernel);
  std::mt19937_64 rng(31 + static_cast<uint64_t>(kernel + 1));
  for (int k = 0; k < 120; ++k) {
    SCOPED_TRACE(::testing::Message() << "case " << k);
    checkPackUnpack(makeGatherCase(rng), rng, k % 2 == 0 ? kGatherBlockBytes : 1);
    if (::testing::Test::HasFatalFailure()) return;
  }
  if (kernel < 0) {
    EXPECT_GE(block64GatherDecision(false), 0) << "calls of 32 blocks and more decide, within the shared cache";
    EXPECT_GE(block64GatherDecision(true), 0) << "and beyond it";
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, Block64Gather, ::testing::Values(-1, 0, 1, 2),
                         [](const ::testing::TestParamInfo<int>& param) {
                           return param.param < 0 ? std::string("trials")
                                                  : std::string(gatherKernelName(static_cast<GatherKernel>(param.param)));
                         });

}  // namespace
}  // namespace ibdt::datatype
