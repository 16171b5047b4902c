// tests/datatype/block_copy_test.cc — every large-block copy kernel
// (datatype/block_copy.h), in cache and beyond it, against the reference
// type-map interpreter, byte for byte, with guard bytes on both buffers.
#include <algorithm>
#include <cstdlib>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "datatype/block_copy.h"
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

// Large blocks of bytes or doubles, as a vector (strided runs) or an
// indexed-block type (runs at displacements), odd sizes included.
Case makeCase(std::mt19937_64& rng, int shape) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const bool doubles = shape % 2 == 0;
  const Datatype elem = doubles ? Datatype::of<double>() : Datatype::of<uint8_t>();
  const Ref refElem = testing::refBasic(doubles ? BasicKind::kDouble : BasicKind::kUint8);
  const int64_t elemBytes = doubles ? 8 : 1;
  const int64_t blocklen = pick(kLargeBlockBytes, 9000) / elemBytes;
  const int64_t blockBytes = blocklen * elemBytes;
  const int64_t blocks = pick(1, 40);
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

void checkPackUnpack(const Case& c, std::mt19937_64& rng) {
  const std::vector<int64_t> offsets = testing::refByteOffsets(c.ref, c.count);
  const int64_t size = static_cast<int64_t>(offsets.size());
  int64_t hi = 0;
  for (int64_t o : offsets) hi = std::max(hi, o + 1);
  const int64_t typedMisalign = static_cast<int64_t>(rng() % 64), packedMisalign = static_cast<int64_t>(rng() % 64);
  std::vector<uint8_t> typed(static_cast<size_t>(hi + 2 * kGuardBytes), kGuard);
  uint8_t* base = typed.data() + typedMisalign;
  for (int64_t o : offsets) base[o] = static_cast<uint8_t>(rng());
  auto seg = Segment::create(c.type, c.count);
  ASSERT_TRUE(seg.isOk()) << seg.status().toString();
  ASSERT_EQ(seg->size(), size);

  std::vector<uint8_t> packed(static_cast<size_t>(size + 2 * kGuardBytes), kGuard);
  uint8_t* out = packed.data() + packedMisalign;
  const int64_t cut = size == 0 ? 0 : static_cast<int64_t>(rng() % static_cast<uint64_t>(size));
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
  for (int k = 0; k < 60; ++k) {
    SCOPED_TRACE(::testing::Message() << "case " << k);
    checkPackUnpack(makeCase(rng, k % 4), rng);
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
  plan.inCache = plan.beyondCache = kernel;
  plan.streamAbove = int64_t{1} << 40;  // every copy "in cache"
  setBlockCopyPlanForTesting(plan);
  checkManyTypes(11);
  plan.streamAbove = kLargeBlockBytes;  // every copy "beyond the cache"
  plan.inCache = BlockKernel::kMemcpy;
  setBlockCopyPlanForTesting(plan);
  checkManyTypes(12);
}

INSTANTIATE_TEST_SUITE_P(Kernels, ForcedKernel, ::testing::Range(0, kBlockKernelCount),
                         [](const ::testing::TestParamInfo<int>& param) {
                           return std::string(blockKernelName(static_cast<BlockKernel>(param.param)));
                         });

TEST(BlockCopy, AutomaticPlanCalibratesThenDecidesBeyondTheCacheByTrials) {
  resetBlockCopyPlanForTesting(/*streamAbove=*/kLargeBlockBytes);
  // Data first: every copy, during the trials and after the decision, is checked.
  checkManyTypes(13);
  auto plan = blockCopyPlan();
  ASSERT_TRUE(plan.isOk()) << plan.status().toString();
  EXPECT_FALSE(plan->forced);
  EXPECT_TRUE(plan->beyondDecided) << "60 large copies are more than the trials";
  EXPECT_TRUE(blockKernelAvailable(plan->inCache));
  EXPECT_TRUE(blockKernelAvailable(plan->beyondCache));
  resetBlockCopyPlanForTesting();
}

TEST(BlockCopy, ForcedByTheKnobAndABadValueIsAnErrorThatStillCopies) {
  ASSERT_EQ(setenv("IBDT_PACK_COPY", "stream", 1), 0);
  resetBlockCopyPlanForTesting();
  auto plan = blockCopyPlan();
  ASSERT_TRUE(plan.isOk()) << plan.status().toString();
  EXPECT_TRUE(plan->forced);
  if (blockKernelAvailable(BlockKernel::kStream)) {
    EXPECT_EQ(plan->beyondCache, BlockKernel::kStream);
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

}  // namespace
}  // namespace ibdt::datatype
