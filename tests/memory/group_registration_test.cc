// Optimistic group registration: few regions for column layouts, correct
// splitting around unmapped gaps, and a key for every block.
#include "transport/memory/group_registration.h"

#include <algorithm>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "memory/fake_domain.h"
#include "memory/mapping.h"

namespace ibdt::memory {
namespace {

using testing::FakeDomain;
using testing::Mapping;

constexpr uint32_t kAccess = fabric::kLocalWrite | fabric::kRemoteRead | fabric::kRemoteWrite;

class GroupRegistrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CacheOptions options;
    options.mode = CacheOptions::Mode::kOn;
    auto cache = RegistrationCache::create(domain_, options);
    ASSERT_TRUE(cache.isOk()) << cache.status().toString();
    cache_ = std::move(cache).value();
  }
  GroupPlanOptions planOptions() const { return {domain_.caps().registration, page_, 0}; }

  // Every block lies inside the region it was given, and a transfer through
  // that region's key carries the block's bytes.
  void expectEveryBlockCovered(std::span<const Block> blocks, const GroupRegistration& result) {
    ASSERT_EQ(result.regionOfBlock.size(), blocks.size());
    for (size_t i = 0; i < blocks.size(); ++i) {
      if (blocks[i].length == 0) {
        EXPECT_EQ(result.regionOfBlock[i], GroupRegistration::kNoRegion);
        continue;
      }
      ASSERT_LT(result.regionOfBlock[i], result.regions.size()) << "block " << i;
      auto bytes = domain_.read(result.lkey(i), blocks[i].address, blocks[i].length);
      ASSERT_TRUE(bytes.isOk()) << "block " << i << ": " << bytes.status().toString();
      const auto* expected = static_cast<const uint8_t*>(blocks[i].address);
      EXPECT_TRUE(std::equal(bytes->begin(), bytes->end(), expected)) << "block " << i;
      EXPECT_EQ(result.rkey(i), result.regions[result.regionOfBlock[i]].rkey());
    }
  }

  FakeDomain domain_;  // verbs-like model: 5 us per registration + 0.25 us per page
  size_t page_ = domain_.caps().pageSize;
  std::unique_ptr<RegistrationCache> cache_;
};

// The Wu/Wyckoff/Panda benchmark layout: `columns` columns of a 128 x 4096
// int array, i.e. MPI_Type_vector(128, columns, 4096, MPI_INT).
std::vector<Block> columnBlocks(const int* array, size_t columns) {
  std::vector<Block> blocks;
  for (size_t row = 0; row < 128; ++row) blocks.push_back({array + row * 4096, columns * sizeof(int)});
  return blocks;
}

TEST_F(GroupRegistrationTest, ColumnLayoutsNeedTenTimesFewerRegionsThanBlocks) {
  Mapping array(128 * 4096 * sizeof(int));
  auto* ints = reinterpret_cast<int*>(array.data());
  for (size_t i = 0; i < 128 * 4096; ++i) ints[i] = static_cast<int>(i * 2654435761u);
  for (size_t columns = 1; columns <= 2048; columns *= 2) {
    cache_->flush();
    auto registrationsBefore = domain_.stats().registrations;
    std::vector<Block> blocks = columnBlocks(ints, columns);
    auto result = registerGroups(*cache_, blocks, kAccess, planOptions());
    ASSERT_TRUE(result.isOk()) << result.status().toString();
    size_t registrations = domain_.stats().registrations - registrationsBefore;
    EXPECT_LE(result->regions.size() * 10, blocks.size()) << columns << " columns";
    EXPECT_LE(registrations * 10, blocks.size()) << columns << " columns";
    EXPECT_EQ(result->splits, 0u);
    expectEveryBlockCovered(blocks, *result);
  }
}

TEST_F(GroupRegistrationTest, GapsCostlierThanARegistrationAreNotSpanned) {
  Mapping memory(64 * page_);
  // Blocks 1 page apart, then 40 pages apart: 0.25 us/page spans the first
  // (0.25 <= 5) but not the second (10 > 5).
  std::vector<Block> blocks = {{memory.data(), 10},
                               {memory.data() + 2 * page_, 10},
                               {memory.data() + 43 * page_, 10}};
  auto plan = planGroups(blocks, planOptions());
  ASSERT_TRUE(plan.isOk());
  ASSERT_EQ(plan->groups.size(), 2u);
  EXPECT_EQ(plan->groups[0].range.bytes(), 3 * page_);
  EXPECT_EQ(plan->groups[1].range.bytes(), page_);

  GroupPlanOptions free = planOptions();
  free.cost = {5000, 0};  // pinning is free: span everything
  EXPECT_EQ(planGroups(blocks, free)->groups.size(), 1u);
  GroupPlanOptions dear = planOptions();
  dear.cost = {100, 1000};  // pinning is dear: one region per block
  EXPECT_EQ(planGroups(blocks, dear)->groups.size(), 3u);
  GroupPlanOptions capped = free;
  capped.maxRegionBytes = 3 * page_;
  EXPECT_EQ(planGroups(blocks, capped)->groups.size(), 2u);
}

TEST_F(GroupRegistrationTest, AnUnmappedGapIsSplitAroundAndEveryBlockStillRegistered) {
  Mapping memory(8 * page_);
  for (size_t i = 0; i < 8 * page_; ++i) memory.data()[i] = static_cast<uint8_t>(i % 251);
  std::vector<Block> blocks;
  for (size_t pageIndex : {0, 1, 2, 4, 5, 7}) blocks.push_back({memory.data() + pageIndex * page_ + 100, 200});
  ASSERT_EQ(munmap(memory.data() + 3 * page_, page_), 0);  // a hole inside the planned group
  ASSERT_EQ(munmap(memory.data() + 6 * page_, page_), 0);  // and another

  auto plan = planGroups(blocks, planOptions());
  ASSERT_EQ(plan->groups.size(), 1u);  // optimistic: one region over the holes
  auto result = registerGroups(*cache_, blocks, kAccess, planOptions());
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  EXPECT_EQ(result->regions.size(), 3u);  // pages 0-2, 4-5, 7
  EXPECT_EQ(result->splits, 2u);
  EXPECT_GT(result->attempts, 3u);
  for (const RegionRef& region : result->regions) {
    auto begin = static_cast<uint8_t*>(region.region().address());
    auto end = begin + region.region().length();
    for (size_t hole : {3, 6}) {
      uint8_t* holeBegin = memory.data() + hole * page_;
      EXPECT_TRUE(end <= holeBegin || begin >= holeBegin + page_) << "a region covers unmapped page " << hole;
    }
  }
  expectEveryBlockCovered(blocks, *result);
}

TEST_F(GroupRegistrationTest, RandomLayoutsWithHolesRegisterEveryBlock) {
  std::mt19937 random(12345);
  for (int trial = 0; trial < 20; ++trial) {
    const size_t pages = 64;
    Mapping memory(pages * page_);
    std::vector<bool> hole(pages, false);
    for (size_t p = 0; p < pages; ++p) hole[p] = random() % 5 == 0;
    std::vector<Block> blocks;
    for (size_t p = 0; p < pages; ++p) {
      if (hole[p]) continue;
      for (int k = static_cast<int>(random() % 3); k > 0; --k) {
        size_t offset = random() % page_;
        size_t length = random() % (page_ - offset);  // may be zero; stays inside the page
        blocks.push_back({memory.data() + p * page_ + offset, length});
      }
    }
    std::shuffle(blocks.begin(), blocks.end(), random);
    for (size_t p = 0; p < pages; ++p) {
      if (hole[p]) {
        ASSERT_EQ(munmap(memory.data() + p * page_, page_), 0);
      }
    }
    auto result = registerGroups(*cache_, blocks, kAccess, planOptions());
    ASSERT_TRUE(result.isOk()) << "trial " << trial << ": " << result.status().toString();
    expectEveryBlockCovered(blocks, *result);
    size_t nonEmpty = std::count_if(blocks.begin(), blocks.end(), [](const Block& b) { return b.length > 0; });
    EXPECT_LE(result->regions.size(), nonEmpty);
  }
}

TEST_F(GroupRegistrationTest, RegisteringTheSameBlocksAgainHitsTheCache) {
  Mapping array(128 * 4096 * sizeof(int));
  std::vector<Block> blocks = columnBlocks(reinterpret_cast<int*>(array.data()), 3);
  ASSERT_TRUE(registerGroups(*cache_, blocks, kAccess, planOptions()).isOk());
  auto registrations = domain_.stats().registrations;
  auto again = registerGroups(*cache_, blocks, kAccess, planOptions());
  ASSERT_TRUE(again.isOk());
  EXPECT_EQ(domain_.stats().registrations, registrations);
  EXPECT_GT(cache_->counters().hits, 0u);
}

TEST_F(GroupRegistrationTest, AnUnmappedBlockIsAnErrorNamingIt) {
  Mapping memory(4 * page_);
  std::vector<Block> blocks = {{memory.data(), 10}, {memory.data() + 2 * page_, 10}};
  ASSERT_EQ(munmap(memory.data() + 2 * page_, page_), 0);
  auto result = registerGroups(*cache_, blocks, kAccess, planOptions());
  ASSERT_FALSE(result.isOk());
  EXPECT_NE(result.status().message().find("blocks 1..1"), std::string_view::npos) << result.status().toString();
}

TEST_F(GroupRegistrationTest, ZeroLengthBlocksNeedNoRegionAndWrappingBlocksAreRejected) {
  Mapping memory(page_);
  std::vector<Block> blocks = {{memory.data(), 0}, {memory.data() + 8, 8}, {nullptr, 0}};
  auto result = registerGroups(*cache_, blocks, kAccess, planOptions());
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  EXPECT_EQ(result->regions.size(), 1u);
  expectEveryBlockCovered(blocks, *result);

  std::vector<Block> wrapping = {{reinterpret_cast<void*>(UINTPTR_MAX - 4), 16}};
  EXPECT_EQ(registerGroups(*cache_, wrapping, kAccess, planOptions()).status().code(), Code::kOverflow);
  EXPECT_TRUE(registerGroups(*cache_, {}, kAccess, planOptions())->regions.empty());
}

}  // namespace
}  // namespace ibdt::memory
