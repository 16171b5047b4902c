#include "transport/messaging/endpoint_ranks.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace ibdt::messaging {
namespace {

TEST(EndpointRanks, UnknownIdsAreNotFound) {
  EndpointRanks ranks;
  EXPECT_EQ(ranks.find(0), nullptr);
  EXPECT_EQ(ranks.find(7), nullptr);
  ranks.set(7, 3);
  EXPECT_EQ(ranks.find(0), nullptr);
  EXPECT_EQ(ranks.find(8), nullptr);
  ASSERT_NE(ranks.find(7), nullptr);
  EXPECT_EQ(*ranks.find(7), 3);
}

TEST(EndpointRanks, SettingAnIdAgainReplacesItsRank) {
  EndpointRanks ranks;
  ranks.set(42, 1);
  ranks.set(42, 5);
  ASSERT_NE(ranks.find(42), nullptr);
  EXPECT_EQ(*ranks.find(42), 5);
  EXPECT_EQ(ranks.size(), 1u);
}

// Sequential ids (shm), sparse 24-bit ones (verbs QP numbers) and id 0,
// enough to grow the table several times: every id keeps its rank.
TEST(EndpointRanks, AgreesWithAMapThroughGrowth) {
  EndpointRanks ranks;
  std::map<uint32_t, int> expected;
  std::mt19937 random(6);
  for (int i = 0; i < 3000; ++i) {
    uint32_t id = i % 3 == 0 ? static_cast<uint32_t>(i) : static_cast<uint32_t>(random() & 0xffffff);
    if (i == 1) id = 0;
    if (i == 2) id = 0xffffffffu;
    ranks.set(id, i);
    expected[id] = i;
  }
  EXPECT_EQ(ranks.size(), expected.size());
  for (const auto& [id, rank] : expected) {
    const int* found = ranks.find(id);
    ASSERT_NE(found, nullptr) << "id " << id;
    EXPECT_EQ(*found, rank) << "id " << id;
  }
  int absent = 0;
  for (uint32_t id = 0x1000000; id < 0x1000000 + 1000; ++id) absent += ranks.find(id) == nullptr ? 1 : 0;
  EXPECT_EQ(absent, 1000);
}

}  // namespace
}  // namespace ibdt::messaging
