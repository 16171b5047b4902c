// The pin-down cache: hits, merging, LRU limits, and above all that memory
// unmapped and mapped again is never served a stale registration.
#include "transport/memory/registration_cache.h"

#include <dlfcn.h>
#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "ibdt/memory.h"
#include "memory/fake_domain.h"
#include "memory/mapping.h"

namespace ibdt::memory {
namespace {

using testing::FakeDomain;
using testing::Mapping;

constexpr uint32_t kAccess = fabric::kLocalWrite | fabric::kRemoteRead;

class RegistrationCacheTest : public ::testing::Test {
 protected:
  std::unique_ptr<RegistrationCache> makeCache(CacheOptions options = onOptions()) {
    auto cache = RegistrationCache::create(domain_, options);
    EXPECT_TRUE(cache.isOk()) << cache.status().toString();
    return std::move(cache).value();
  }
  static CacheOptions onOptions() {
    CacheOptions options;
    options.mode = CacheOptions::Mode::kOn;
    return options;
  }
  RegionRef acquire(RegistrationCache& cache, const void* address, size_t length, uint32_t access = kAccess) {
    auto ref = cache.acquire(address, length, access);
    EXPECT_TRUE(ref.isOk()) << ref.status().toString();
    return ref.isOk() ? std::move(ref).value() : RegionRef();
  }
  // The bytes a transfer through `ref` would carry.
  std::vector<uint8_t> transfer(const RegionRef& ref, const void* address, size_t length) {
    auto bytes = domain_.read(ref.lkey(), address, length);
    EXPECT_TRUE(bytes.isOk()) << bytes.status().toString();
    return bytes.isOk() ? std::move(bytes).value() : std::vector<uint8_t>();
  }
  static std::vector<uint8_t> pattern(size_t length, uint8_t seed) {
    std::vector<uint8_t> bytes(length);
    for (size_t i = 0; i < length; ++i) bytes[i] = static_cast<uint8_t>(seed + i * 7 + i / 4096);
    return bytes;
  }

  FakeDomain domain_;
  size_t page_ = domain_.caps().pageSize;
};

TEST_F(RegistrationCacheTest, MunmapDetectionIsActiveInThisProcess) {
  EXPECT_TRUE(unmapInterceptionActive());
}

TEST_F(RegistrationCacheTest, ReleasedRegistrationIsHitAgainForAnyCoveredRange) {
  auto cache = makeCache();
  Mapping memory(4 * page_);
  uint32_t lkey = 0;
  {
    RegionRef ref = acquire(*cache, memory.data(), 4 * page_);
    lkey = ref.lkey();
  }
  RegionRef again = acquire(*cache, memory.data() + 100, 2 * page_);
  EXPECT_EQ(again.lkey(), lkey);
  RegionRef inner = acquire(*cache, memory.data() + 3 * page_, 10);  // a second user of the same entry
  EXPECT_EQ(inner.lkey(), lkey);
  CacheCounters counters = cache->counters();
  EXPECT_EQ(counters.misses, 1u);
  EXPECT_EQ(counters.hits, 2u);
  EXPECT_EQ(domain_.stats().registrations, 1u);
  EXPECT_EQ(counters.pinnedBytes, 4 * page_);
}

TEST_F(RegistrationCacheTest, OverlappingMissOfTheSameAccessRegistersTheUnion) {
  auto cache = makeCache();
  Mapping memory(8 * page_);
  uint32_t first = acquire(*cache, memory.data(), 3 * page_, fabric::kRemoteWrite).lkey();
  uint32_t second = acquire(*cache, memory.data() + 2 * page_, 4 * page_, fabric::kRemoteWrite).lkey();
  EXPECT_NE(first, second);
  EXPECT_FALSE(domain_.isLive(first));  // retired into the union, unused, so deregistered
  RegionRef ref = acquire(*cache, memory.data(), 6 * page_, fabric::kRemoteWrite);
  EXPECT_EQ(ref.lkey(), second);
  EXPECT_EQ(ref.region().address(), memory.data());
  EXPECT_EQ(ref.region().length(), 6 * page_);
  EXPECT_EQ(ref.region().access(), fabric::kRemoteWrite);
  EXPECT_EQ(cache->counters().pinnedRegions, 1u);
}

// Regression (issue 17): merged ranges ORed their access flags, so a
// read-only acquire returned a writable region.
TEST_F(RegistrationCacheTest, AHitNeverGrantsMoreAccessThanAsked) {
  auto cache = makeCache();
  Mapping memory(16 * page_);
  constexpr uint32_t kReadOnly = fabric::kLocalWrite | fabric::kRemoteRead;
  constexpr uint32_t kWritable = fabric::kLocalWrite | fabric::kRemoteWrite;
  uint32_t readOnly = acquire(*cache, memory.data(), 4 * page_, kReadOnly).lkey();
  uint32_t writable = acquire(*cache, memory.data() + 2 * page_, 8 * page_, kWritable).lkey();
  EXPECT_TRUE(domain_.isLive(readOnly));  // different access: not merged away
  RegionRef again = acquire(*cache, memory.data(), 4 * page_, kReadOnly);
  EXPECT_EQ(again.lkey(), readOnly);
  EXPECT_EQ(again.region().access(), kReadOnly);
  EXPECT_EQ(again.region().length(), 4 * page_);
  RegionRef write = acquire(*cache, memory.data() + 3 * page_, page_, kWritable);
  EXPECT_EQ(write.lkey(), writable);
  EXPECT_EQ(write.region().access(), kWritable);
  // A registration with both flags is its own class too: neither is reused for it.
  RegionRef both = acquire(*cache, memory.data() + 3 * page_, page_, kReadOnly | kWritable);
  EXPECT_NE(both.lkey(), readOnly);
  EXPECT_NE(both.lkey(), writable);
  EXPECT_EQ(both.region().access(), kReadOnly | kWritable);
  // An unmap retires every class that overlaps it.
  both = RegionRef();
  again = RegionRef();
  write = RegionRef();
  cache->invalidate(memory.data() + 3 * page_, page_);
  EXPECT_EQ(cache->counters().pinnedRegions, 0u);
}

TEST_F(RegistrationCacheTest, MissingAccessFlagIsAMiss) {
  auto cache = makeCache();
  Mapping memory(page_);
  uint32_t readOnly = acquire(*cache, memory.data(), page_, fabric::kRemoteRead).lkey();
  RegionRef writable = acquire(*cache, memory.data(), page_, fabric::kRemoteWrite);
  EXPECT_NE(writable.lkey(), readOnly);
  EXPECT_EQ(writable.region().access(), fabric::kRemoteWrite);
  EXPECT_EQ(cache->counters().misses, 2u);
}

TEST_F(RegistrationCacheTest, MunmapAndMmapAtTheSameAddressGetAFreshRegistration) {
  auto cache = makeCache();
  const size_t length = 4 * page_;
  Mapping memory(length);
  std::vector<uint8_t> old = pattern(length, 1);
  std::memcpy(memory.data(), old.data(), length);
  uint32_t oldKey = 0;
  {
    RegionRef ref = acquire(*cache, memory.data(), length);
    oldKey = ref.lkey();
    EXPECT_EQ(transfer(ref, memory.data(), length), old);
  }
  ASSERT_TRUE(memory.remapInPlace()) << "the kernel placed the new mapping elsewhere";
  std::vector<uint8_t> fresh = pattern(length, 99);
  std::memcpy(memory.data(), fresh.data(), length);

  RegionRef ref = acquire(*cache, memory.data(), length);
  EXPECT_NE(ref.lkey(), oldKey);
  EXPECT_FALSE(domain_.isLive(oldKey));
  EXPECT_EQ(transfer(ref, memory.data(), length), fresh);
  CacheCounters counters = cache->counters();
  EXPECT_EQ(counters.invalidations, 1u);
  EXPECT_EQ(counters.misses, 2u);
  EXPECT_EQ(counters.hits, 0u);
  EXPECT_EQ(domain_.stats().registrations, 2u);
}

TEST_F(RegistrationCacheTest, EveryWayOfReplacingPagesInvalidates) {
  auto cache = makeCache();
  const size_t length = 2 * page_;
  Mapping memory(4 * page_);
  auto expectInvalidatedBy = [&](const char* what, auto&& replacePages) {
    uint32_t before = acquire(*cache, memory.data(), length).lkey();
    uint64_t invalidations = cache->counters().invalidations;
    replacePages();
    EXPECT_EQ(cache->counters().invalidations, invalidations + 1) << what;
    EXPECT_NE(acquire(*cache, memory.data(), length).lkey(), before) << what;
  };
  expectInvalidatedBy("madvise(MADV_DONTNEED)", [&] { ASSERT_EQ(madvise(memory.data(), page_, MADV_DONTNEED), 0); });
  expectInvalidatedBy("madvise(MADV_FREE)",
                      [&] { ASSERT_EQ(madvise(memory.data() + page_, page_, MADV_FREE), 0); });
  expectInvalidatedBy("mmap(MAP_FIXED)", [&] {
    void* over = mmap(memory.data(), page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    ASSERT_EQ(over, memory.data());
  });
  expectInvalidatedBy("mremap (shrink)", [&] {
    ASSERT_EQ(mremap(memory.data(), 4 * page_, 3 * page_, 0), memory.data());
    ASSERT_EQ(mremap(memory.data(), 3 * page_, 4 * page_, 0), memory.data());  // grow back in place
  });
  expectInvalidatedBy("munmap through the process-wide binding", [&] {
    auto resolved = reinterpret_cast<int (*)(void*, size_t)>(dlsym(RTLD_DEFAULT, "munmap"));
    ASSERT_EQ(resolved(memory.data() + page_, page_), 0);
    void* back = mmap(memory.data() + page_, page_, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    ASSERT_EQ(back, memory.data() + page_);
  });
  expectInvalidatedBy("invalidateRegistrations()", [&] { invalidateRegistrations(memory.data() + 5, 1); });
  // Advice that keeps the pages does not invalidate.
  uint32_t key = acquire(*cache, memory.data(), length).lkey();
  ASSERT_EQ(madvise(memory.data(), length, MADV_WILLNEED), 0);
  EXPECT_EQ(acquire(*cache, memory.data(), length).lkey(), key);
}

TEST_F(RegistrationCacheTest, UnmapElsewhereKeepsTheRegistration) {
  auto cache = makeCache();
  Mapping memory(page_);
  uint32_t key = acquire(*cache, memory.data(), page_).lkey();
  { Mapping other(page_); }  // mapped and unmapped somewhere else
  EXPECT_EQ(acquire(*cache, memory.data(), page_).lkey(), key);
  EXPECT_EQ(cache->counters().invalidations, 0u);
}

TEST_F(RegistrationCacheTest, TooManyQueuedUnmapsRetireEverythingRatherThanLoseOne) {
  auto cache = makeCache();
  const size_t pages = 302;
  Mapping memory(pages * page_);
  uint32_t first = acquire(*cache, memory.data(), page_).lkey();
  uint32_t last = acquire(*cache, memory.data() + (pages - 1) * page_, page_).lkey();
  // Unmaps between the two registrations touch neither; a few are applied
  // precisely, a flood past the queue conservatively drops everything.
  for (size_t p = 1; p <= 100; ++p) invalidateRegistrations(memory.data() + p * page_, page_);
  EXPECT_EQ(acquire(*cache, memory.data(), page_).lkey(), first);
  for (size_t p = 1; p < pages - 1; ++p) invalidateRegistrations(memory.data() + p * page_, page_);
  EXPECT_NE(acquire(*cache, memory.data(), page_).lkey(), first);
  EXPECT_NE(acquire(*cache, memory.data() + (pages - 1) * page_, page_).lkey(), last);
  EXPECT_FALSE(domain_.isLive(first));
  EXPECT_FALSE(domain_.isLive(last));
}

TEST_F(RegistrationCacheTest, RegistrationInUseSurvivesUnmapUntilReleased) {
  auto cache = makeCache();
  Mapping memory(2 * page_);
  RegionRef inUse = acquire(*cache, memory.data(), 2 * page_);
  ASSERT_TRUE(memory.remapInPlace());
  EXPECT_TRUE(domain_.isLive(inUse.lkey()));  // a transfer may still be using it
  RegionRef fresh = acquire(*cache, memory.data(), 2 * page_);
  EXPECT_NE(fresh.lkey(), inUse.lkey());
  uint32_t oldKey = inUse.lkey();
  inUse.reset();
  EXPECT_FALSE(domain_.isLive(oldKey));
  EXPECT_TRUE(domain_.isLive(fresh.lkey()));
  EXPECT_EQ(cache->counters().pinnedRegions, 1u);
}

// Is [address, address + length) inside the brk heap ("[heap]" in /proc/self/maps)?
bool insideBrkHeap(const void* address, size_t length) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  auto begin = reinterpret_cast<uintptr_t>(address);
  while (std::getline(maps, line)) {
    if (line.find("[heap]") == std::string::npos) continue;
    uintptr_t low = 0;
    uintptr_t high = 0;
    char dash = 0;
    std::istringstream in(line);
    in >> std::hex >> low >> dash >> high;
    return low <= begin && begin + length <= high;
  }
  return false;
}

TEST_F(RegistrationCacheTest, FreeAndMallocAtTheSameAddressCarryTheNewData) {
  auto cache = makeCache();
  const size_t length = 1 << 20;  // above glibc's default mmap threshold
  auto* first = static_cast<uint8_t*>(std::malloc(length));
  ASSERT_NE(first, nullptr);
  std::vector<uint8_t> old = pattern(length, 3);
  std::memcpy(first, old.data(), length);
  uint32_t oldKey = 0;
  {
    RegionRef ref = acquire(*cache, first, length);
    oldKey = ref.lkey();
    EXPECT_EQ(transfer(ref, first, length), old);
  }
  std::free(first);
  auto* second = static_cast<uint8_t*>(std::malloc(length));
  ASSERT_NE(second, nullptr);
  std::vector<uint8_t> fresh = pattern(length, 200);
  std::memcpy(second, fresh.data(), length);
  RegionRef ref = acquire(*cache, second, length);
  EXPECT_EQ(transfer(ref, second, length), fresh);
  if (ref.lkey() == oldKey) {
    // A hit is right only if the pages never left: glibc served the block
    // from the brk heap, which retainHeapMemory() keeps from shrinking.
    EXPECT_TRUE(retainHeapMemory());
    EXPECT_TRUE(insideBrkHeap(second, length)) << "a cached registration over memory free() could unmap";
  }
  if (retainHeapMemory()) {
    EXPECT_TRUE(insideBrkHeap(second, length)) << "mallopt(M_MMAP_MAX, 0) should keep large blocks in the heap";
  }
  ref.reset();
  std::free(second);
}

TEST_F(RegistrationCacheTest, ReallocCarriesTheNewData) {
  auto cache = makeCache();
  const size_t small = 64 << 10;
  const size_t large = 4 << 20;
  auto* buffer = static_cast<uint8_t*>(std::malloc(small));
  ASSERT_NE(buffer, nullptr);
  std::memset(buffer, 0x11, small);
  acquire(*cache, buffer, small).reset();
  auto* grown = static_cast<uint8_t*>(std::realloc(buffer, large));
  ASSERT_NE(grown, nullptr);
  std::vector<uint8_t> fresh = pattern(large, 42);
  std::memcpy(grown, fresh.data(), large);
  {
    RegionRef ref = acquire(*cache, grown, large);
    EXPECT_EQ(transfer(ref, grown, large), fresh);
  }
  auto* shrunk = static_cast<uint8_t*>(std::realloc(grown, small));
  ASSERT_NE(shrunk, nullptr);
  std::memset(shrunk, 0x77, small);
  {
    RegionRef ref = acquire(*cache, shrunk, small);
    EXPECT_EQ(transfer(ref, shrunk, small), std::vector<uint8_t>(small, 0x77));
  }
  std::free(shrunk);
}

TEST_F(RegistrationCacheTest, EvictsLeastRecentlyUsedUnderTheRegionLimit) {
  CacheOptions options = onOptions();
  options.maxRegions = 2;
  auto cache = makeCache(options);
  Mapping memory(6 * page_);
  auto at = [&](int i) { return memory.data() + 2 * i * page_; };
  uint32_t keys[3];
  for (int i = 0; i < 3; ++i) keys[i] = acquire(*cache, at(i), page_).lkey();
  CacheCounters counters = cache->counters();
  EXPECT_EQ(counters.evictions, 1u);
  EXPECT_EQ(counters.pinnedRegions, 2u);
  EXPECT_FALSE(domain_.isLive(keys[0]));
  EXPECT_EQ(acquire(*cache, at(2), page_).lkey(), keys[2]);  // hit; 1 is now the oldest
  EXPECT_NE(acquire(*cache, at(0), page_).lkey(), keys[0]);  // miss; evicts 1
  EXPECT_FALSE(domain_.isLive(keys[1]));
  EXPECT_TRUE(domain_.isLive(keys[2]));
}

TEST_F(RegistrationCacheTest, EvictsUnderTheByteLimitButNeverWhatIsInUse) {
  CacheOptions options = onOptions();
  options.maxBytes = 2 * page_;
  auto cache = makeCache(options);
  Mapping memory(8 * page_);
  RegionRef big = acquire(*cache, memory.data(), 4 * page_);  // over the limit, but in use
  RegionRef small = acquire(*cache, memory.data() + 6 * page_, page_);
  EXPECT_TRUE(domain_.isLive(big.lkey()));
  EXPECT_EQ(cache->counters().evictions, 0u);
  uint32_t bigKey = big.lkey();
  big.reset();  // now unreferenced and over the limit
  EXPECT_FALSE(domain_.isLive(bigKey));
  EXPECT_EQ(cache->counters().evictions, 1u);
  EXPECT_EQ(cache->counters().pinnedBytes, page_);
}

TEST_F(RegistrationCacheTest, FlushDeregistersEverythingUnused) {
  auto cache = makeCache();
  Mapping memory(4 * page_);
  RegionRef kept = acquire(*cache, memory.data(), page_);
  acquire(*cache, memory.data() + 2 * page_, page_).reset();
  cache->flush();
  EXPECT_EQ(domain_.liveRegions(), 1u);
  EXPECT_TRUE(domain_.isLive(kept.lkey()));
}

TEST_F(RegistrationCacheTest, OffModeRegistersEveryTime) {
  CacheOptions options;
  options.mode = CacheOptions::Mode::kOff;
  auto cache = makeCache(options);
  EXPECT_FALSE(cache->caching());
  Mapping memory(page_);
  uint32_t first = acquire(*cache, memory.data(), page_).lkey();
  uint32_t second = acquire(*cache, memory.data(), page_).lkey();
  EXPECT_NE(first, second);
  EXPECT_EQ(domain_.liveRegions(), 0u);
  EXPECT_EQ(domain_.stats().registrations, 2u);
  EXPECT_EQ(cache->counters().misses, 2u);
}

TEST_F(RegistrationCacheTest, AutoModeCachesOnlyWhenUnmapsAreVisible) {
  CacheOptions options;
  options.mode = CacheOptions::Mode::kAuto;
  auto cache = makeCache(options);
  EXPECT_EQ(cache->caching(), retainHeapMemory() && unmapInterceptionActive()) << cache->modeDescription();
  EXPECT_FALSE(cache->modeDescription().empty());
}

TEST_F(RegistrationCacheTest, BadInputIsRejectedAndCachesNothing) {
  auto cache = makeCache();
  Mapping memory(page_);
  auto zero = cache->acquire(memory.data(), 0, kAccess);
  EXPECT_EQ(zero.status().code(), Code::kInvalidArgument);
  auto wraps = cache->acquire(reinterpret_cast<void*>(UINTPTR_MAX - 10), 100, kAccess);
  EXPECT_EQ(wraps.status().code(), Code::kOverflow);

  void* hole = Mapping::reserveHole(page_);
  ASSERT_NE(hole, nullptr);
  auto unmapped = cache->acquire(hole, page_, kAccess);
  ASSERT_FALSE(unmapped.isOk());
  EXPECT_NE(unmapped.status().message().find("not mapped"), std::string_view::npos) << unmapped.status().toString();
  CacheCounters counters = cache->counters();
  EXPECT_EQ(counters.failures, 1u);
  EXPECT_EQ(counters.pinnedRegions, 0u);
  EXPECT_EQ(domain_.liveRegions(), 0u);
}

TEST_F(RegistrationCacheTest, UnreportedUnmapOfANeighbourFallsBackToTheRequestedRange) {
  // Mode on with an unmap the cache never hears of (a raw system call): the
  // union with the stale neighbour fails, the requested range alone works and
  // the stale neighbour is retired.
  auto cache = makeCache();
  Mapping memory(4 * page_);
  acquire(*cache, memory.data(), 2 * page_).reset();
  ASSERT_EQ(syscall(SYS_munmap, memory.data(), page_), 0);
  RegionRef ref = acquire(*cache, memory.data() + page_, 2 * page_);
  EXPECT_EQ(ref.region().address(), memory.data() + page_);
  EXPECT_EQ(cache->counters().pinnedRegions, 1u);
  EXPECT_EQ(cache->counters().failures, 1u);
}

TEST_F(RegistrationCacheTest, ConcurrentUsersAndUnmapsNeverSeeStaleRegistrations) {
  auto cache = makeCache();
  constexpr int kThreads = 4;
  constexpr int kRounds = 300;
  const size_t length = 3 * page_;
  Mapping shared(8 * page_);
  std::atomic<int> staleData{0};
  std::atomic<int> deadKey{0};
  std::atomic<int> errors{0};
  auto worker = [&](int id) {
    Mapping own(length);
    for (int round = 0; round < kRounds; ++round) {
      auto value = static_cast<uint8_t>(id * 31 + round);
      std::memset(own.data(), value, length);
      {
        auto ref = cache->acquire(own.data(), length, kAccess);
        auto bytes = ref.isOk() ? domain_.read(ref->lkey(), own.data(), length) : ref.status();
        if (!bytes.isOk()) {
          ADD_FAILURE() << bytes.status().toString();
          ++errors;
        } else if (*bytes != std::vector<uint8_t>(length, value)) {
          ++staleData;
        }
        auto other = cache->acquire(shared.data() + (round % 5) * page_, 2 * page_, kAccess);
        if (!other.isOk()) {
          ADD_FAILURE() << other.status().toString();
          ++errors;
        } else if (!domain_.isLive(other->lkey())) {
          ++deadKey;
        }
      }
      // Another thread may take the address between munmap and mmap; the
      // mapping then moves, which is just as fresh.
      if (round % 3 == 0) own.remapInPlace();
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) threads.emplace_back(worker, i);
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(domain_.stats().overlappingCalls, 0u);
  EXPECT_EQ(staleData.load(), 0);
  EXPECT_EQ(deadKey.load(), 0);
  EXPECT_EQ(errors.load(), 0);
  CacheCounters counters = cache->counters();
  EXPECT_GT(counters.hits, 0u);
  EXPECT_GE(counters.invalidations, static_cast<uint64_t>(kThreads * kRounds / 3));
}

}  // namespace
}  // namespace ibdt::memory
