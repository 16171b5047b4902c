// Copies at distances (destination − source mod 4096) measured slow on this
// CPU take another route (base/copy_bytes.h, transport/fabric/shm/copy_distance.h). The
// routes are forced here for every distance so they run on any machine, and
// every byte is checked, both directions, across staging chunks, and at an
// unmapped peer address (an error, not a crash).
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include <gtest/gtest.h>

#include "base/copy_bytes.h"
#include "support/pattern.h"
#include "transport/fabric/shm/copy_distance.h"
#include "transport/fabric/shm/remote_copy.h"

namespace ibdt::fabric::shm {
namespace {

constexpr uint32_t kEveryBucket = (uint32_t{1} << (SlowDistances::kZeroBucket + 1)) - 1;

TEST(SlowDistances, FoldsDistancesModuloAPageIntoBuckets) {
  SlowDistances slow;
  slow.mark(10);  // [16, 24)
  slow.mark(6);   // [-16, -8)
  const uintptr_t source = 0x10000 + 100;
  EXPECT_TRUE(slow.slow(source + 16, source, 8192));
  EXPECT_TRUE(slow.slow(source + 23 + 3 * 4096, source, 8192));
  EXPECT_TRUE(slow.slow(source - 12, source, 8192));
  EXPECT_FALSE(slow.slow(source + 24, source, 8192));
  EXPECT_FALSE(slow.slow(source + 15, source, 8192));
  EXPECT_FALSE(slow.slow(source + 2048, source, 8192));
  EXPECT_FALSE(slow.slow(source + 16, source, SlowDistances::kMinBytes - 1));  // short copies keep memcpy
  EXPECT_FALSE(slow.slow(source + 4096, source, 8192));
  EXPECT_EQ(slow.describe(), "[-16,-8) [16,24)");
  slow.mark(SlowDistances::kZeroBucket);
  EXPECT_TRUE(slow.slow(source, source + 8192, 8192));
  EXPECT_FALSE(slow.slow(source + 1, source, 8192));  // [0, 8) is not marked
  EXPECT_EQ(slow.describe(), "0 [-16,-8) [16,24)");
  EXPECT_EQ(SlowDistances().describe(), "none");
}

struct ForcedDistances {
  explicit ForcedDistances(uint32_t mask)
      : savedMemcpy(memcpySlowDistances()), savedCrossMemory(crossMemorySlowDistances()) {
    setMemcpySlowDistancesForTesting(SlowDistances(mask));
    setCrossMemorySlowDistancesForTesting(SlowDistances(mask));
  }
  ~ForcedDistances() {
    setMemcpySlowDistancesForTesting(savedMemcpy);
    setCrossMemorySlowDistancesForTesting(savedCrossMemory);
  }
  SlowDistances savedMemcpy, savedCrossMemory;
};

struct Buffers {
  static constexpr size_t kSpan = 300 << 10;
  Buffers()
      : near(static_cast<uint8_t*>(std::aligned_alloc(4096, kSpan)), &std::free),
        far(static_cast<uint8_t*>(std::aligned_alloc(4096, kSpan)), &std::free) {}
  std::unique_ptr<uint8_t, decltype(&std::free)> near, far;
};

// Copies `bytes` between near+64 and far+64+distance through copyRemote
// (cross-memory attach to this process, or a mapped piece), checking every
// byte of the destination and that its surroundings are untouched.
void copyAndCheck(Direction direction, bool mapped, int64_t distance, size_t bytes, uint32_t seed) {
  Buffers buffers;
  std::memset(buffers.near.get(), 0xee, Buffers::kSpan);
  std::memset(buffers.far.get(), 0xee, Buffers::kSpan);
  uint8_t* near = buffers.near.get() + 4096 + 64;
  uint8_t* far = buffers.far.get() + 4096 + 64 + distance;
  uint8_t* source = direction == Direction::kToPeer ? near : far;
  uint8_t* destination = direction == Direction::kToPeer ? far : near;
  test::fillPattern(source, bytes, seed);
  iovec local{near, bytes};
  RemotePiece remote{reinterpret_cast<uint64_t>(far), bytes, mapped ? far : nullptr};
  CopyOutcome outcome = copyRemote(direction, getpid(), std::span(&local, 1), std::span(&remote, 1));
  ASSERT_EQ(outcome.status, CompletionStatus::kSuccess) << "errno " << outcome.error;
  for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(destination[i], test::patternByte(i, seed)) << "byte " << i;
  EXPECT_EQ(destination[-1], 0xee);
  EXPECT_EQ(destination[bytes], 0xee);
}

TEST(SlowDistances, EveryRouteDeliversEveryByte) {
  ForcedDistances forced(kEveryBucket);
  bool crossMemory = crossMemoryAttachAvailable();
  uint32_t seed = 1;
  for (Direction direction : {Direction::kToPeer, Direction::kFromPeer}) {
    for (int64_t distance : {16, -16, 0, 1, 63, 2048}) {
      for (size_t bytes : {size_t{4096}, size_t{(64 << 10) + 123}, size_t{200 << 10}}) {
        SCOPED_TRACE(testing::Message() << "to peer " << (direction == Direction::kToPeer) << " distance "
                                        << distance << " bytes " << bytes);
        copyAndCheck(direction, /*mapped=*/true, distance, bytes, seed++);
        if (crossMemory) copyAndCheck(direction, /*mapped=*/false, distance, bytes, seed++);
      }
    }
  }
}

TEST(SlowDistances, StagedCopyToUnmappedMemoryFailsCleanly) {
  if (!crossMemoryAttachAvailable()) GTEST_SKIP() << "no cross-memory attach here";
  ForcedDistances forced(kEveryBucket);
  constexpr size_t kBytes = 128 << 10;
  void* hole = mmap(nullptr, kBytes + 8192, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(hole, MAP_FAILED);
  Buffers buffers;
  test::fillPattern(buffers.near.get(), kBytes, 7);
  // 16 bytes past the source's page offset: the staged route.
  auto far = reinterpret_cast<uint64_t>(hole) + 4096 + 16;
  iovec local{buffers.near.get(), kBytes};
  RemotePiece remote{far, kBytes, nullptr};
  CopyOutcome written = copyRemote(Direction::kToPeer, getpid(), std::span(&local, 1), std::span(&remote, 1));
  EXPECT_EQ(written.status, CompletionStatus::kRemoteAccess);
  CopyOutcome read = copyRemote(Direction::kFromPeer, getpid(), std::span(&local, 1), std::span(&remote, 1));
  EXPECT_EQ(read.status, CompletionStatus::kRemoteAccess);
  munmap(hole, kBytes + 8192);
}

}  // namespace
}  // namespace ibdt::fabric::shm
