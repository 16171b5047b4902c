// The memory layer on the real shm provider: pool buffers and cached or
// grouped registrations carry one-sided writes between two domains, a remapped
// buffer gets a fresh key while the stale one is refused, and OGR splits
// around holes that shm's registration (mincore, like ibv_reg_mr) rejects.
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <tuple>

#include <gtest/gtest.h>

#include "base/backoff.h"
#include "ibdt/fabric.h"
#include "memory/mapping.h"
#include "transport/memory/buffer_pool.h"
#include "transport/memory/group_registration.h"
#include "transport/memory/registration_cache.h"
#include "transport/memory/registration_cost.h"

namespace ibdt::memory {
namespace {

using testing::Mapping;
using namespace ibdt::fabric;

constexpr uint32_t kAccess = kLocalWrite | kRemoteRead | kRemoteWrite;

// One process, two domains: `a` writes into memory of `b`.
class ShmMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (auto* side : {&a_, &b_}) {
      auto domain = openDomain("shm", {"memory-test", ""});
      if (!domain.isOk() && domain.status().code() == Code::kUnsupported) GTEST_SKIP() << domain.status().toString();
      ASSERT_TRUE(domain.isOk()) << domain.status().toString();
      side->domain = std::move(domain).value();
      auto send = side->domain->createCompletionQueue(256);
      auto recv = side->domain->createCompletionQueue(256);
      ASSERT_TRUE(send.isOk() && recv.isOk());
      side->sendQueue = std::move(send).value();
      side->recvQueue = std::move(recv).value();
    }
    connect();
    CacheOptions options;
    options.mode = CacheOptions::Mode::kOn;
    auto cache = RegistrationCache::create(*b_.domain, options);
    ASSERT_TRUE(cache.isOk()) << cache.status().toString();
    cache_ = std::move(cache).value();
  }

  void connect() {
    for (auto* side : {&a_, &b_}) {
      auto endpoint = side->domain->createEndpoint(*side->sendQueue, *side->recvQueue, {});
      ASSERT_TRUE(endpoint.isOk()) << endpoint.status().toString();
      side->endpoint = std::move(endpoint).value();
    }
    ASSERT_TRUE(a_.endpoint->connect(b_.endpoint->address()).isOk());
    ASSERT_TRUE(b_.endpoint->connect(a_.endpoint->address()).isOk());
  }

  // RDMA WRITE of `sges` (local to a) to b's `remote`; returns the completion status.
  CompletionStatus write(const std::vector<Sge>& sges, uint64_t remoteAddress, uint64_t rkey) {
    return post(Opcode::kWrite, sges, remoteAddress, rkey);
  }
  // RDMA READ from b's `remote` into `sges` (local to a).
  CompletionStatus read(const std::vector<Sge>& sges, uint64_t remoteAddress, uint64_t rkey) {
    return post(Opcode::kRead, sges, remoteAddress, rkey);
  }
  CompletionStatus post(Opcode opcode, const std::vector<Sge>& sges, uint64_t remoteAddress, uint64_t rkey) {
    SendRequest request;
    request.id = ++nextId_;
    request.opcode = opcode;
    request.sgList = sges.data();
    request.numSge = static_cast<uint32_t>(sges.size());
    request.remoteAddress = remoteAddress;
    request.rkey = rkey;
    Status posted = a_.endpoint->postSend(request);
    EXPECT_TRUE(posted.isOk()) << posted.toString();
    Completion completion;
    Backoff backoff;
    for (int spins = 0; spins < 2'000'000; ++spins) {
      if (a_.sendQueue->poll({&completion, 1}) == 1) return completion.status;
      backoff.pause();
    }
    ADD_FAILURE() << "no completion for write " << request.id;
    return CompletionStatus::kFatal;
  }

  // A source buffer in a's domain, registered directly.
  std::pair<std::vector<uint8_t>, std::unique_ptr<MemoryRegion>> source(size_t length, uint8_t seed) {
    std::vector<uint8_t> bytes(length);
    for (size_t i = 0; i < length; ++i) bytes[i] = static_cast<uint8_t>(seed + i * 13);
    auto region = a_.domain->registerMemory(bytes.data(), length, kAccess);
    EXPECT_TRUE(region.isOk()) << region.status().toString();
    return {std::move(bytes), region.isOk() ? std::move(region).value() : nullptr};
  }

  struct Side {
    std::unique_ptr<Domain> domain;
    std::unique_ptr<CompletionQueue> sendQueue;
    std::unique_ptr<CompletionQueue> recvQueue;
    std::unique_ptr<Endpoint> endpoint;
  };
  Side a_, b_;
  std::unique_ptr<RegistrationCache> cache_;
  uint64_t nextId_ = 0;
};

TEST_F(ShmMemoryTest, PoolBuffersTakeOneSidedWrites) {
  auto pool = BufferPool::create(*b_.domain, {});
  ASSERT_TRUE(pool.isOk()) << pool.status().toString();
  size_t length = 3 * b_.domain->caps().pageSize + 5;
  auto target = (*pool)->get(length);
  ASSERT_TRUE(target.isOk()) << target.status().toString();
  std::memset(target->data(), 0, target->size());
  auto [bytes, region] = source(length, 7);
  ASSERT_EQ(write({{reinterpret_cast<uint64_t>(bytes.data()), static_cast<uint32_t>(length), region->lkey()}},
                  target->remoteKey().address, target->rkey()),
            CompletionStatus::kSuccess);
  EXPECT_EQ(std::memcmp(target->data(), bytes.data(), length), 0);
  EXPECT_EQ(static_cast<uint8_t*>(target->data())[length], 0) << "wrote past the range";
}

TEST_F(ShmMemoryTest, RemappedTargetGetsAFreshKeyAndTheStaleOneIsRefused) {
  size_t page = b_.domain->caps().pageSize;
  Mapping target(2 * page);
  auto [bytes, region] = source(2 * page, 3);
  std::vector<Sge> sges = {{reinterpret_cast<uint64_t>(bytes.data()), static_cast<uint32_t>(2 * page), region->lkey()}};
  uint64_t staleKey = 0;
  {
    auto ref = cache_->acquire(target.data(), 2 * page, kAccess);
    ASSERT_TRUE(ref.isOk()) << ref.status().toString();
    staleKey = ref->rkey();
    ASSERT_EQ(write(sges, reinterpret_cast<uint64_t>(target.data()), staleKey), CompletionStatus::kSuccess);
    EXPECT_EQ(std::memcmp(target.data(), bytes.data(), 2 * page), 0);
  }
  ASSERT_TRUE(target.remapInPlace());
  auto fresh = cache_->acquire(target.data(), 2 * page, kAccess);  // applies the unmap: deregisters the old key
  ASSERT_TRUE(fresh.isOk()) << fresh.status().toString();
  EXPECT_NE(fresh->rkey(), staleKey);
  EXPECT_EQ(cache_->counters().invalidations, 1u);

  EXPECT_EQ(write(sges, reinterpret_cast<uint64_t>(target.data()), staleKey), CompletionStatus::kRemoteAccess);
  EXPECT_EQ(target.data()[0], 0) << "a stale key wrote into the new mapping";
  connect();  // the refused write moved the endpoints to the error state
  ASSERT_EQ(write(sges, reinterpret_cast<uint64_t>(target.data()), fresh->rkey()), CompletionStatus::kSuccess);
  EXPECT_EQ(std::memcmp(target.data(), bytes.data(), 2 * page), 0);
}

TEST_F(ShmMemoryTest, FreeAndMallocAtTheSameAddressServeTheNewData) {
  // b registers a heap buffer through the cache, frees it and allocates again
  // (glibc hands back the same address); a peer's READ must see the new bytes.
  const size_t length = 256 << 10;
  auto [landing, landingRegion] = source(length, 0);
  std::vector<Sge> sges = {{reinterpret_cast<uint64_t>(landing.data()), static_cast<uint32_t>(length),
                            landingRegion->lkey()}};
  auto* first = static_cast<uint8_t*>(std::malloc(length));
  ASSERT_NE(first, nullptr);
  std::memset(first, 0xAA, length);
  {
    auto ref = cache_->acquire(first, length, kAccess);
    ASSERT_TRUE(ref.isOk()) << ref.status().toString();
    ASSERT_EQ(read(sges, reinterpret_cast<uint64_t>(first), ref->rkey()), CompletionStatus::kSuccess);
    EXPECT_EQ(landing, std::vector<uint8_t>(length, 0xAA));
  }
  std::free(first);
  auto* second = static_cast<uint8_t*>(std::malloc(length));
  ASSERT_NE(second, nullptr);
  for (size_t i = 0; i < length; ++i) second[i] = static_cast<uint8_t>(i * 5 + 1);
  {
    auto ref = cache_->acquire(second, length, kAccess);
    ASSERT_TRUE(ref.isOk()) << ref.status().toString();
    ASSERT_EQ(read(sges, reinterpret_cast<uint64_t>(second), ref->rkey()), CompletionStatus::kSuccess);
    EXPECT_EQ(std::memcmp(landing.data(), second, length), 0) << (second == first ? "same address" : "new address");
  }
  std::free(second);
}

TEST_F(ShmMemoryTest, ColumnsGatheredThroughGroupedRegions) {
  // RWG-UP's sender side: the columns of a 128 x 4096 int array are
  // registered by OGR on a's domain and gathered by one-sided writes into a
  // contiguous target on b.
  auto cost = registrationCostOf(*a_.domain);
  ASSERT_TRUE(cost.isOk()) << cost.status().toString();
  CacheOptions options;
  options.mode = CacheOptions::Mode::kOn;
  auto sourceCache = RegistrationCache::create(*a_.domain, options);
  ASSERT_TRUE(sourceCache.isOk());
  Mapping array(128 * 4096 * sizeof(int));
  auto* ints = reinterpret_cast<int*>(array.data());
  for (size_t i = 0; i < 128 * 4096; ++i) ints[i] = static_cast<int>(i * 2654435761u);
  uint32_t maxSge = a_.domain->caps().maxSendSge;
  for (size_t columns : {size_t{1}, size_t{16}, size_t{2048}}) {
    std::vector<Block> blocks;
    for (size_t row = 0; row < 128; ++row) blocks.push_back({ints + row * 4096, columns * sizeof(int)});
    auto grouped = registerGroups(**sourceCache, blocks, kAccess, {*cost, a_.domain->caps().pageSize, 0});
    ASSERT_TRUE(grouped.isOk()) << grouped.status().toString();
    EXPECT_LE(grouped->regions.size() * 10, blocks.size()) << columns << " columns";

    size_t packed = 128 * columns * sizeof(int);
    std::vector<uint8_t> out(packed + 64, 0);
    auto targetRef = cache_->acquire(out.data(), out.size(), kAccess);
    ASSERT_TRUE(targetRef.isOk()) << targetRef.status().toString();
    for (size_t first = 0; first < blocks.size(); first += maxSge) {
      std::vector<Sge> sges;
      for (size_t i = first; i < std::min(blocks.size(), first + maxSge); ++i) {
        sges.push_back({reinterpret_cast<uint64_t>(blocks[i].address), static_cast<uint32_t>(blocks[i].length),
                        grouped->lkey(i)});
      }
      uint64_t remote = reinterpret_cast<uint64_t>(out.data()) + first * columns * sizeof(int);
      ASSERT_EQ(write(sges, remote, targetRef->rkey()), CompletionStatus::kSuccess) << columns << " columns";
    }
    for (size_t row = 0; row < 128; ++row) {
      ASSERT_EQ(std::memcmp(out.data() + row * columns * sizeof(int), ints + row * 4096, columns * sizeof(int)), 0)
          << "row " << row << " of " << columns << " columns";
    }
    EXPECT_TRUE(std::all_of(out.begin() + static_cast<long>(packed), out.end(), [](uint8_t b) { return b == 0; }));
  }
}

TEST_F(ShmMemoryTest, GroupRegistrationSplitsAroundAHoleShmRefuses) {
  size_t page = a_.domain->caps().pageSize;
  CacheOptions options;
  options.mode = CacheOptions::Mode::kOff;  // count real registrations
  auto cache = RegistrationCache::create(*a_.domain, options);
  ASSERT_TRUE(cache.isOk());
  Mapping memory(5 * page);
  for (size_t i = 0; i < 5 * page; ++i) memory.data()[i] = static_cast<uint8_t>(i * 7);
  std::vector<Block> blocks = {{memory.data() + 10, 100}, {memory.data() + page + 10, 100},
                               {memory.data() + 3 * page, 50}, {memory.data() + 4 * page + 1000, 3000}};
  ASSERT_EQ(munmap(memory.data() + 2 * page, page), 0);
  auto grouped = registerGroups(**cache, blocks, kAccess, {{300, 2}, page, 0});
  ASSERT_TRUE(grouped.isOk()) << grouped.status().toString();
  EXPECT_EQ(grouped->regions.size(), 2u);
  EXPECT_EQ(grouped->splits, 1u);
  EXPECT_EQ((*cache)->counters().failures, 1u);

  std::vector<uint8_t> out(4096, 0);
  auto targetRef = cache_->acquire(out.data(), out.size(), kAccess);
  ASSERT_TRUE(targetRef.isOk());
  std::vector<Sge> sges;
  size_t total = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    sges.push_back({reinterpret_cast<uint64_t>(blocks[i].address), static_cast<uint32_t>(blocks[i].length),
                    grouped->lkey(i)});
    total += blocks[i].length;
  }
  ASSERT_EQ(write(sges, reinterpret_cast<uint64_t>(out.data()), targetRef->rkey()), CompletionStatus::kSuccess);
  size_t offset = 0;
  for (const Block& block : blocks) {
    EXPECT_EQ(std::memcmp(out.data() + offset, block.address, block.length), 0);
    offset += block.length;
  }
  EXPECT_EQ(offset, total);
}

TEST_F(ShmMemoryTest, ThreadsShareACacheAndAPoolOnOneDomain) {
  // shm's registration table is not thread-safe; the memory layer serializes
  // its calls, and every key it hands out still carries a write.
  size_t page = b_.domain->caps().pageSize;
  PoolOptions poolOptions;
  poolOptions.highWaterBytes = 0;
  auto pool = BufferPool::create(*b_.domain, poolOptions);
  ASSERT_TRUE(pool.isOk());
  Mapping memory(64 * page);
  std::atomic<int> failures{0};
  auto worker = [&](int id) {
    for (int round = 0; round < 200; ++round) {
      auto buffer = (*pool)->get(page << (round % 3));
      size_t offset = static_cast<size_t>((id * 5 + round * 3) % 60) * page;
      auto ref = cache_->acquire(memory.data() + offset, 2 * page, kAccess);
      if (!buffer.isOk() || !ref.isOk()) ++failures;
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back(worker, i);
  for (auto& thread : threads) thread.join();
  ASSERT_EQ(failures.load(), 0);

  auto [bytes, region] = source(4 * page, 11);
  auto target = cache_->acquire(memory.data() + 8 * page, 4 * page, kAccess);
  ASSERT_TRUE(target.isOk());
  ASSERT_EQ(write({{reinterpret_cast<uint64_t>(bytes.data()), static_cast<uint32_t>(4 * page), region->lkey()}},
                  reinterpret_cast<uint64_t>(memory.data() + 8 * page), target->rkey()),
            CompletionStatus::kSuccess);
  EXPECT_EQ(std::memcmp(memory.data() + 8 * page, bytes.data(), 4 * page), 0);
}

TEST_F(ShmMemoryTest, RegistrationCostIsMeasurable) {
  auto cost = measureRegistrationCost(*a_.domain, 64, 3);
  ASSERT_TRUE(cost.isOk()) << cost.status().toString();
  EXPECT_GE(cost->fixedNs, 0);
  EXPECT_GE(cost->perPageNs, 0);
  EXPECT_GT(cost->fixedNs + cost->perPageNs * 64, 0);
}

// Regression (issue 17): an 8-byte registration through the cache used to
// grant its whole page, so a read 3990 bytes past it succeeded. A key a peer
// gets now reaches exactly the bytes registered.
TEST_F(ShmMemoryTest, AnEightByteRegistrationRefusesAReadOneBytePastIt) {
  size_t page = b_.domain->caps().pageSize;
  Mapping target(page);
  for (size_t i = 0; i < page; ++i) target.data()[i] = static_cast<uint8_t>(i * 7 + 1);
  uint8_t* secret = target.data() + 100;
  auto ref = cache_->acquire(secret, 8, kLocalWrite | kRemoteRead);
  ASSERT_TRUE(ref.isOk()) << ref.status().toString();
  EXPECT_EQ(ref->region().length(), 8u);
  auto [into, region] = source(page, 0);
  std::fill(into.begin(), into.end(), 0);
  auto sge = [&, &into = into, &region = region](uint32_t length) {
    return std::vector<Sge>{{reinterpret_cast<uint64_t>(into.data()), length, region->lkey()}};
  };
  auto at = [&](const uint8_t* p) { return reinterpret_cast<uint64_t>(p); };
  ASSERT_EQ(read(sge(8), at(secret), ref->rkey()), CompletionStatus::kSuccess);
  EXPECT_EQ(std::memcmp(into.data(), secret, 8), 0);
  std::fill(into.begin(), into.end(), 0);
  // A refused access puts the endpoint in the error state (as an RC queue
  // pair): each probe gets a fresh pair.
  for (auto [length, address] : {std::pair<uint32_t, const uint8_t*>{9, secret}, {1, secret + 8}, {1, secret - 1},
                                 {1, target.data() + 3990}}) {
    ASSERT_NO_FATAL_FAILURE(connect());
    EXPECT_EQ(read(sge(length), at(address), ref->rkey()), CompletionStatus::kRemoteAccess)
        << length << " bytes at offset " << (address - secret);
  }
  EXPECT_TRUE(std::all_of(into.begin(), into.end(), [](uint8_t b) { return b == 0; })) << "a refused read delivered";
  // Local-only use still registers whole pages (more hits, nothing exposed).
  auto local = cache_->acquire(secret, 8, kLocalWrite);
  ASSERT_TRUE(local.isOk()) << local.status().toString();
  EXPECT_EQ(local->region().length(), page);
}

// Regression (issue 17): a pool chunk's key reached every buffer of the
// chunk, so a peer given one staging buffer could read and write the buffers
// other peers' transfers used. On shm each hand-out now has a key of its own.
TEST_F(ShmMemoryTest, APoolBufferKeyReachesOnlyItsBuffer) {
  auto pool = BufferPool::create(*b_.domain, {});
  ASSERT_TRUE(pool.isOk()) << pool.status().toString();
  ASSERT_TRUE((*pool)->perBufferKeys());
  size_t page = b_.domain->caps().pageSize;
  auto first = (*pool)->get(page);
  auto second = (*pool)->get(page);
  ASSERT_TRUE(first.isOk() && second.isOk());
  auto* a = static_cast<uint8_t*>(first->data());
  auto* b = static_cast<uint8_t*>(second->data());
  ASSERT_EQ(std::abs(a - b), static_cast<std::ptrdiff_t>(page)) << "not neighbours in one chunk";
  EXPECT_NE(first->rkey(), second->rkey());
  EXPECT_EQ(first->region().length(), first->size());
  EXPECT_EQ((*pool)->counters().bufferKeys, 2u);
  std::memset(a, 0, page);
  std::memset(b, 0xBB, page);
  auto [bytes, region] = source(page, 5);
  std::vector<Sge> sge{{reinterpret_cast<uint64_t>(bytes.data()), static_cast<uint32_t>(page), region->lkey()}};
  auto at = [](const uint8_t* p) { return reinterpret_cast<uint64_t>(p); };
  // Through its own key a buffer takes writes at its place in the segment.
  ASSERT_EQ(write(sge, at(a), first->rkey()), CompletionStatus::kSuccess);
  EXPECT_EQ(std::memcmp(a, bytes.data(), page), 0);
  // The neighbour is out of reach of that key: writes, reads, a straddle.
  std::vector<Sge> one{{reinterpret_cast<uint64_t>(bytes.data()), 1, region->lkey()}};
  for (auto [opcode, address, what] : {std::tuple{Opcode::kWrite, b, "write"}, {Opcode::kRead, b, "read"},
                                       {Opcode::kWrite, b + page - 1, "write at the end"}}) {
    ASSERT_NO_FATAL_FAILURE(connect());
    EXPECT_EQ(post(opcode, one, at(address), first->rkey()), CompletionStatus::kRemoteAccess) << what;
  }
  ASSERT_NO_FATAL_FAILURE(connect());
  EXPECT_EQ(post(Opcode::kWrite, sge, at(a + 1), first->rkey()), CompletionStatus::kRemoteAccess) << "straddle";
  EXPECT_TRUE(std::all_of(b, b + page, [](uint8_t v) { return v == 0xBB; })) << "the neighbour was written";
  // The neighbour's own key still works.
  ASSERT_NO_FATAL_FAILURE(connect());
  ASSERT_EQ(write(sge, at(b), second->rkey()), CompletionStatus::kSuccess);
  EXPECT_EQ(std::memcmp(b, bytes.data(), page), 0);
}

TEST_F(ShmMemoryTest, APoolBufferKeyDiesWhenTheBufferIsGivenBack) {
  auto pool = BufferPool::create(*b_.domain, {});
  ASSERT_TRUE(pool.isOk()) << pool.status().toString();
  size_t page = b_.domain->caps().pageSize;
  auto lent = (*pool)->get(page);
  ASSERT_TRUE(lent.isOk());
  void* address = lent->data();
  uint64_t oldKey = lent->rkey();
  lent->reset();
  auto again = (*pool)->get(page);  // the same slot (the most recently returned is reused first)
  ASSERT_TRUE(again.isOk());
  ASSERT_EQ(again->data(), address);
  EXPECT_NE(again->rkey(), oldKey);
  std::memset(again->data(), 0, page);
  auto [bytes, region] = source(page, 9);
  std::vector<Sge> sge{{reinterpret_cast<uint64_t>(bytes.data()), static_cast<uint32_t>(page), region->lkey()}};
  auto target = reinterpret_cast<uint64_t>(address);
  EXPECT_EQ(write(sge, target, oldKey), CompletionStatus::kRemoteAccess) << "the last hand-out's key still works";
  EXPECT_TRUE(std::all_of(static_cast<uint8_t*>(address), static_cast<uint8_t*>(address) + page,
                          [](uint8_t v) { return v == 0; }));
  ASSERT_NO_FATAL_FAILURE(connect());
  EXPECT_EQ(write(sge, target, again->rkey()), CompletionStatus::kSuccess);
  EXPECT_EQ(std::memcmp(address, bytes.data(), page), 0);
}

// IBDT_POOL_BUFFER_KEYS=off: the chunk's key, as before (one registration per chunk).
TEST_F(ShmMemoryTest, WithoutPerBufferKeysBuffersShareTheChunkKey) {
  PoolOptions options;
  options.perBufferKeys = false;
  auto pool = BufferPool::create(*b_.domain, options);
  ASSERT_TRUE(pool.isOk()) << pool.status().toString();
  EXPECT_FALSE((*pool)->perBufferKeys());
  size_t page = b_.domain->caps().pageSize;
  auto first = (*pool)->get(page);
  auto second = (*pool)->get(page);
  ASSERT_TRUE(first.isOk() && second.isOk());
  EXPECT_EQ(first->rkey(), second->rkey());
  EXPECT_EQ((*pool)->counters().bufferKeys, 0u);
}

}  // namespace
}  // namespace ibdt::memory
