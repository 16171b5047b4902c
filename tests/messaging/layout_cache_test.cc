// LayoutCache (transport/messaging/layout_cache.h): both halves of the
// per-peer layout cache of docs/design.md (Section 4.4.2 of the paper).
#include "transport/messaging/layout_cache.h"

#include <gtest/gtest.h>

namespace ibdt::messaging {
namespace {

TEST(LayoutCache, ReceivedLayoutsMatchIdAndVersion) {
  LayoutCache cache;
  EXPECT_EQ(cache.received(7, 1), nullptr);
  auto vector = datatype::Datatype::vector(4, 1, 2, datatype::Datatype::of<int32_t>());
  ASSERT_TRUE(vector.isOk());
  const datatype::Datatype& stored = cache.store(7, 1, *vector);
  EXPECT_EQ(stored.size(), 16);
  ASSERT_NE(cache.received(7, 1), nullptr);
  EXPECT_EQ(cache.received(7, 1)->size(), 16);
  EXPECT_EQ(cache.received(7, 2), nullptr);  // another version is not this one
  EXPECT_EQ(cache.received(8, 1), nullptr);
  // A newer version replaces the older one.
  cache.store(7, 2, datatype::Datatype::of<double>());
  EXPECT_EQ(cache.received(7, 1), nullptr);
  ASSERT_NE(cache.received(7, 2), nullptr);
  EXPECT_EQ(cache.received(7, 2)->size(), 8);
}

TEST(LayoutCache, SentLayoutsAreRememberedByVersion) {
  LayoutCache cache;
  auto vector = datatype::Datatype::vector(4, 1, 2, datatype::Datatype::of<int32_t>());
  ASSERT_TRUE(vector.isOk());
  EXPECT_FALSE(cache.peerHolds(*vector));
  cache.sentToPeer(*vector);
  EXPECT_TRUE(cache.peerHolds(*vector));
  EXPECT_FALSE(cache.peerHolds(datatype::Datatype::of<double>()));
}

}  // namespace
}  // namespace ibdt::messaging
