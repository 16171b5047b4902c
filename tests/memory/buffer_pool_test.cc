// The buffer pool: size classes, growth, release above the high-water mark,
// dedicated oversize buffers, and buffers that never overlap.
#include "transport/memory/buffer_pool.h"

#include <cstdlib>
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "memory/fake_domain.h"
#include "transport/memory/registration_cache.h"

#include "support/scoped_env.h"

using ibdt::test::ScopedEnv;

namespace ibdt::memory {
namespace {

using testing::FakeDomain;

class BufferPoolTest : public ::testing::Test {
 protected:
  std::unique_ptr<BufferPool> makePool(PoolOptions options = {}) {
    auto pool = BufferPool::create(domain_, options);
    EXPECT_TRUE(pool.isOk()) << pool.status().toString();
    return std::move(pool).value();
  }
  PoolBuffer get(BufferPool& pool, size_t bytes) {
    auto buffer = pool.get(bytes);
    EXPECT_TRUE(buffer.isOk()) << buffer.status().toString();
    return buffer.isOk() ? std::move(buffer).value() : PoolBuffer();
  }

  FakeDomain domain_;
  size_t page_ = domain_.caps().pageSize;
};

TEST_F(BufferPoolTest, BuffersArePageAlignedRegisteredAndLargeEnough) {
  auto pool = makePool();
  for (size_t bytes : {size_t{0}, size_t{1}, page_, page_ + 1, size_t{100000}, pool->maxBufferBytes()}) {
    PoolBuffer buffer = get(*pool, bytes);
    ASSERT_TRUE(buffer);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer.data()) % page_, 0u) << bytes;
    EXPECT_GE(buffer.size(), std::max(bytes, page_));
    EXPECT_EQ(buffer.size(), pool->classSize(bytes));
    EXPECT_TRUE(domain_.isLive(buffer.lkey()));
    // Inside its region, and a transfer through the key sees what was written.
    std::memset(buffer.data(), 0x5a, buffer.size());
    auto bytesRead = domain_.read(buffer.lkey(), buffer.data(), buffer.size());
    ASSERT_TRUE(bytesRead.isOk()) << bytesRead.status().toString();
    EXPECT_EQ(*bytesRead, std::vector<uint8_t>(buffer.size(), 0x5a));
    EXPECT_EQ(buffer.remoteKey().rkey, buffer.rkey());
    EXPECT_EQ(buffer.sge(7).lkey, buffer.lkey());
  }
}

TEST_F(BufferPoolTest, GrowsByAChunkAndThenServesFromTheFreeList) {
  PoolOptions options;
  options.chunkBytes = 8 * page_;
  auto pool = makePool(options);
  std::vector<PoolBuffer> held;
  for (int i = 0; i < 8; ++i) held.push_back(get(*pool, page_));
  PoolCounters counters = pool->counters();
  EXPECT_EQ(counters.growths, 1u);
  EXPECT_EQ(counters.hits, 7u);
  EXPECT_EQ(domain_.stats().allocations, 1u);
  held.push_back(get(*pool, page_));  // the chunk is used up
  EXPECT_EQ(pool->counters().growths, 2u);
  EXPECT_EQ(pool->counters().buffersInUse, 9u);
  EXPECT_EQ(pool->counters().bytesAllocated, 16 * page_);

  // Every buffer is its own memory: fill each with its index and check all.
  for (size_t i = 0; i < held.size(); ++i) std::memset(held[i].data(), static_cast<int>(i + 1), page_);
  for (size_t i = 0; i < held.size(); ++i) {
    auto bytes = domain_.read(held[i].lkey(), held[i].data(), page_);
    ASSERT_TRUE(bytes.isOk());
    EXPECT_EQ(*bytes, std::vector<uint8_t>(page_, static_cast<uint8_t>(i + 1))) << i;
  }
  void* reused = held.back().data();
  held.pop_back();
  EXPECT_EQ(get(*pool, page_).data(), reused);  // the warmest buffer comes back first
}

TEST_F(BufferPoolTest, ReleasesFreeChunksAboveTheHighWaterMark) {
  PoolOptions options;
  options.chunkBytes = 4 * page_;
  options.highWaterBytes = 4 * page_;  // keep one chunk's worth of free buffers
  auto pool = makePool(options);
  std::vector<PoolBuffer> held;
  for (int i = 0; i < 12; ++i) held.push_back(get(*pool, page_));
  EXPECT_EQ(pool->counters().growths, 3u);
  held.clear();
  PoolCounters counters = pool->counters();
  EXPECT_EQ(counters.releases, 2u);
  EXPECT_EQ(counters.bytesAllocated, 4 * page_);
  EXPECT_EQ(domain_.liveRegions(), 1u);
  for (int i = 0; i < 4; ++i) held.push_back(get(*pool, page_));
  EXPECT_EQ(pool->counters().growths, 3u);  // the kept chunk serves them
}

TEST_F(BufferPoolTest, OversizeRequestsGetADedicatedRegistration) {
  PoolOptions options;
  options.maxBufferBytes = 4 * page_;
  auto pool = makePool(options);
  {
    PoolBuffer big = get(*pool, 10 * page_ + 1);
    EXPECT_EQ(big.size(), 11 * page_);
    EXPECT_EQ(pool->counters().oversize, 1u);
    std::memset(big.data(), 1, big.size());
  }
  EXPECT_EQ(domain_.liveRegions(), 0u);
  EXPECT_EQ(pool->counters().bytesAllocated, 0u);
}

TEST_F(BufferPoolTest, AllocationFailureIsReportedWithContext) {
  auto pool = makePool();
  domain_.setAllocationLimit(0);
  auto buffer = pool->get(page_);
  ASSERT_FALSE(buffer.isOk());
  EXPECT_EQ(buffer.status().code(), Code::kResource);
  EXPECT_NE(buffer.status().message().find("growing"), std::string_view::npos) << buffer.status().toString();
  EXPECT_EQ(pool->get(SIZE_MAX).status().code(), Code::kOverflow);
  EXPECT_EQ(pool->counters().buffersInUse, 0u);
}

TEST_F(BufferPoolTest, RejectsAnUnusableConfiguration) {
  PoolOptions options;
  options.maxBufferBytes = 16;
  EXPECT_EQ(BufferPool::create(domain_, options).status().code(), Code::kInvalidArgument);
}

TEST_F(BufferPoolTest, ThreadsShareOnePool) {
  PoolOptions options;
  options.chunkBytes = 16 * page_;
  options.highWaterBytes = 0;
  auto pool = makePool(options);
  constexpr int kThreads = 4;
  std::atomic<int> failures{0};
  auto worker = [&](int id) {
    for (int round = 0; round < 500; ++round) {
      size_t bytes = page_ << (round % 3);
      auto buffer = pool->get(bytes);
      if (!buffer.isOk()) {
        ++failures;
        continue;
      }
      auto value = static_cast<uint8_t>(id * 50 + round);
      std::memset(buffer->data(), value, bytes);
      std::this_thread::yield();
      auto bytesRead = domain_.read(buffer->lkey(), buffer->data(), bytes);
      if (!bytesRead.isOk() || *bytesRead != std::vector<uint8_t>(bytes, value)) ++failures;
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) threads.emplace_back(worker, i);
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(pool->counters().buffersInUse, 0u);
  EXPECT_EQ(domain_.liveRegions(), 0u);  // high-water 0: everything went back
  EXPECT_EQ(domain_.stats().overlappingCalls, 0u);
}

}  // namespace
}  // namespace ibdt::memory

namespace ibdt::memory {
namespace {

TEST(MemoryThreads, APoolAndACacheNeverCallTheirDomainConcurrently) {
  FakeDomain domain;
  size_t page = domain.caps().pageSize;
  PoolOptions poolOptions;
  poolOptions.chunkBytes = 2 * page;
  poolOptions.highWaterBytes = 0;  // grow and release all the time
  auto pool = BufferPool::create(domain, poolOptions);
  CacheOptions cacheOptions;
  cacheOptions.mode = CacheOptions::Mode::kOn;
  cacheOptions.maxRegions = 3;  // evict all the time
  auto cache = RegistrationCache::create(domain, cacheOptions);
  ASSERT_TRUE(pool.isOk() && cache.isOk());
  std::vector<uint8_t> memory(64 * page, 1);
  std::atomic<int> failures{0};
  auto worker = [&](int id) {
    for (int round = 0; round < 300; ++round) {
      auto buffer = (*pool)->get(page * (1 + round % 2));
      size_t offset = static_cast<size_t>((id * 7 + round * 3) % 60) * page;
      auto ref = (*cache)->acquire(memory.data() + offset, page + 100, fabric::kLocalWrite);
      if (!buffer.isOk() || !ref.isOk() || !domain.isLive(ref->lkey()) || !domain.isLive(buffer->lkey())) ++failures;
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back(worker, i);
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(domain.stats().overlappingCalls, 0u);
  EXPECT_GT(domain.stats().registrations, 3u);
  EXPECT_GT((*pool)->counters().releases, 0u);
}

TEST(MemoryOptions, PoolAndCacheKnobsAreReadAndBadValuesRejected) {
  {
    ScopedEnv chunk("IBDT_POOL_CHUNK_BYTES", "2M");
    ScopedEnv high("IBDT_POOL_HIGH_WATER", "0");
    auto options = PoolOptions::fromEnvironment();
    ASSERT_TRUE(options.isOk()) << options.status().toString();
    EXPECT_EQ(options->chunkBytes, size_t{2} << 20);
    EXPECT_EQ(options->highWaterBytes, 0u);
    EXPECT_EQ(options->maxBufferBytes, size_t{4} << 20);
    EXPECT_TRUE(options->perBufferKeys);
  }
  {
    ScopedEnv keys("IBDT_POOL_BUFFER_KEYS", "off");
    auto options = PoolOptions::fromEnvironment();
    ASSERT_TRUE(options.isOk()) << options.status().toString();
    EXPECT_FALSE(options->perBufferKeys);
  }
  {
    ScopedEnv keys("IBDT_POOL_BUFFER_KEYS", "sometimes");
    auto options = PoolOptions::fromEnvironment();
    ASSERT_FALSE(options.isOk());
    EXPECT_NE(options.status().message().find("IBDT_POOL_BUFFER_KEYS"), std::string_view::npos);
  }
  {
    ScopedEnv mode("IBDT_REG_CACHE", "OFF");
    ScopedEnv regions("IBDT_REG_CACHE_MAX_REGIONS", "17");
    auto options = CacheOptions::fromEnvironment();
    ASSERT_TRUE(options.isOk()) << options.status().toString();
    EXPECT_EQ(options->mode, CacheOptions::Mode::kOff);
    EXPECT_EQ(options->maxRegions, 17u);
    EXPECT_EQ(options->maxBytes, uint64_t{1} << 30);
  }
  {
    ScopedEnv mode("IBDT_REG_CACHE", "sometimes");
    auto options = CacheOptions::fromEnvironment();
    ASSERT_FALSE(options.isOk());
    EXPECT_NE(options.status().message().find("IBDT_REG_CACHE"), std::string_view::npos);
  }
  {
    ScopedEnv regions("IBDT_REG_CACHE_MAX_REGIONS", "0");
    EXPECT_EQ(CacheOptions::fromEnvironment().status().code(), Code::kInvalidArgument);
  }
  {
    ScopedEnv bytes("IBDT_POOL_MAX_BUFFER", "12 parsecs");
    EXPECT_EQ(PoolOptions::fromEnvironment().status().code(), Code::kInvalidArgument);
  }
}

}  // namespace
}  // namespace ibdt::memory

namespace ibdt::memory {
namespace {

TEST(MemoryStats, CountersArePrintedWhenThePoolAndCacheGoAwayUnderIbdtStats) {
  FakeDomain domain;
  setenv("IBDT_STATS", "1", 1);
  ::testing::internal::CaptureStderr();
  {
    auto pool = BufferPool::create(domain, {});
    ASSERT_TRUE(pool.isOk());
    ASSERT_TRUE((*pool)->get(1).isOk());
    CacheOptions options;
    options.mode = CacheOptions::Mode::kOn;
    auto cache = RegistrationCache::create(domain, options);
    ASSERT_TRUE(cache.isOk());
    std::vector<uint8_t> memory(100);
    ASSERT_TRUE((*cache)->acquire(memory.data(), memory.size(), fabric::kLocalWrite).isOk());
    ASSERT_TRUE((*cache)->acquire(memory.data(), memory.size(), fabric::kLocalWrite).isOk());
  }
  std::string printed = ::testing::internal::GetCapturedStderr();
  unsetenv("IBDT_STATS");
  EXPECT_NE(printed.find("registration cache: hits=1 misses=1"), std::string::npos) << printed;
  EXPECT_NE(printed.find("buffer pool: gets=1 hits=0 growths=1"), std::string::npos) << printed;
}

// Regression: IBDT_STATS=garbage silently meant off.
TEST(MemoryStats, AnInvalidIbdtStatsIsAnErrorAtCreation) {
  FakeDomain domain;
  setenv("IBDT_STATS", "garbage", 1);
  auto pool = BufferPool::create(domain, {});
  CacheOptions options;
  options.mode = CacheOptions::Mode::kOn;
  auto cache = RegistrationCache::create(domain, options);
  unsetenv("IBDT_STATS");
  ASSERT_EQ(pool.status().code(), Code::kInvalidArgument);
  EXPECT_NE(pool.status().toString().find("IBDT_STATS='garbage' is invalid"), std::string::npos)
      << pool.status().toString();
  ASSERT_EQ(cache.status().code(), Code::kInvalidArgument);
  EXPECT_NE(cache.status().toString().find("IBDT_STATS='garbage' is invalid"), std::string::npos)
      << cache.status().toString();
}

}  // namespace
}  // namespace ibdt::memory
