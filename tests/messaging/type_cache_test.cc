#include "transport/messaging/type_cache.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace ibdt::messaging {
namespace {

using datatype::Datatype;

Datatype committed(Result<Datatype> made) {
  EXPECT_TRUE(made.isOk()) << made.status().toString();
  Datatype type = std::move(made).value();
  EXPECT_TRUE(type.commit().isOk());
  return type;
}

// Packs count x type from a buffer of distinct bytes with a cached segment
// and with a freshly created one; both must give the same bytes.
void expectSamePacking(TypeCache& cache, const Datatype& type, int64_t count) {
  auto cached = cache.segment(type, count);
  auto fresh = datatype::Segment::create(type, count);
  ASSERT_TRUE(cached.isOk() && fresh.isOk());
  ASSERT_EQ(cached->size(), fresh->size());
  EXPECT_EQ(cached->position(), 0);
  int64_t span = count == 0 ? 0 : type.trueUb() + (count - 1) * type.extent();
  std::vector<uint8_t> typed(static_cast<size_t>(span) + 1);
  for (size_t i = 0; i < typed.size(); ++i) typed[i] = static_cast<uint8_t>(i * 7 + 3);
  std::vector<uint8_t> a(static_cast<size_t>(fresh->size())), b(a.size());
  ASSERT_TRUE(cached->pack(typed.data(), 0, cached->size(), a.data()).isOk());
  ASSERT_TRUE(fresh->pack(typed.data(), 0, fresh->size(), b.data()).isOk());
  EXPECT_EQ(a, b) << "type " << type.id() << " count " << count;
}

TEST(TypeCache, AgreesWithTheDatatypeEngine) {
  TypeCache cache;
  Datatype vector = committed(Datatype::vector(16, 3, 64, Datatype::of<int32_t>()));
  Datatype doubles = Datatype::of<double>();
  for (int round = 0; round < 2; ++round) {  // first computed, then remembered
    for (int64_t count : {0, 1, 2, 128, 1000}) {
      for (const Datatype& type : {vector, doubles}) {
        auto cached = cache.signature(type, count);
        auto direct = datatype::signature(type, count);
        ASSERT_TRUE(cached.isOk() && direct.isOk());
        EXPECT_EQ(*cached, *direct) << "type " << type.id() << " count " << count;
        expectSamePacking(cache, type, count);
      }
    }
  }
}

TEST(TypeCache, ASegmentHandedOutDoesNotMoveTheCachedOne) {
  TypeCache cache;
  Datatype type = committed(Datatype::vector(4, 2, 3, Datatype::of<int16_t>()));
  auto first = cache.segment(type, 2);
  ASSERT_TRUE(first.isOk());
  std::vector<int16_t> typed(32, 5);
  std::vector<uint8_t> out(static_cast<size_t>(first->size()));
  ASSERT_TRUE(first->packNext(typed.data(), out.data(), 6).isOk());
  EXPECT_EQ(first->position(), 6);
  auto second = cache.segment(type, 2);
  ASSERT_TRUE(second.isOk());
  EXPECT_EQ(second->position(), 0);
}

TEST(TypeCache, ManyPairsSharingSlotsStayDistinct) {
  TypeCache cache;
  std::vector<Datatype> types;
  for (int i = 1; i <= 40; ++i) types.push_back(committed(Datatype::contiguous(i, Datatype::of<int16_t>())));
  types.push_back(Datatype::of<float>());
  for (int round = 0; round < 3; ++round) {
    for (const Datatype& type : types) {
      for (int64_t count = 1; count <= 5; ++count) {
        auto cached = cache.signature(type, count);
        ASSERT_TRUE(cached.isOk());
        EXPECT_EQ(*cached, *datatype::signature(type, count));
        auto segment = cache.segment(type, count);
        ASSERT_TRUE(segment.isOk());
        EXPECT_EQ(segment->size(), type.size() * count);
      }
    }
  }
}

TEST(TypeCache, RecycledTypeIdGetsItsNewLayout) {
  TypeCache cache;
  Datatype first = committed(Datatype::vector(4, 1, 2, Datatype::of<int32_t>()));
  uint32_t id = first.id();
  ASSERT_TRUE(cache.signature(first, 1).isOk());
  ASSERT_TRUE(cache.segment(first, 1).isOk());
  first.free();  // the last handle: the id goes back to the pool
  // Types made now may reuse the id with a new version; whichever does must
  // not be given the freed type's signature or layout.
  std::vector<Datatype> later;
  for (int i = 0; i < 8; ++i) later.push_back(committed(Datatype::contiguous(4, Datatype::of<double>())));
  bool reused = false;
  for (const Datatype& type : later) {
    reused = reused || type.id() == id;
    auto cached = cache.signature(type, 1);
    ASSERT_TRUE(cached.isOk());
    EXPECT_EQ(*cached, *datatype::signature(type, 1));
    EXPECT_NE(*cached, *datatype::signature(Datatype::of<int32_t>(), 4));
    expectSamePacking(cache, type, 1);
  }
  EXPECT_TRUE(reused) << "id " << id << " was not recycled: the test did not exercise reuse";
}

}  // namespace
}  // namespace ibdt::messaging
