#include "transport/messaging/signature_cache.h"

#include <gtest/gtest.h>

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

TEST(SignatureCache, AgreesWithTheDatatypeEngine) {
  SignatureCache cache;
  Datatype vector = committed(Datatype::vector(128, 3, 4096, Datatype::of<int32_t>()));
  Datatype doubles = Datatype::of<double>();
  for (int round = 0; round < 2; ++round) {  // first computed, then remembered
    for (int64_t count : {0, 1, 2, 128, 1000}) {
      for (const Datatype& type : {vector, doubles}) {
        auto cached = cache.get(type, count);
        auto direct = datatype::signature(type, count);
        ASSERT_TRUE(cached.isOk() && direct.isOk());
        EXPECT_EQ(*cached, *direct) << "type " << type.id() << " count " << count;
      }
    }
  }
}

TEST(SignatureCache, ManyPairsSharingSlotsStayDistinct) {
  SignatureCache cache;
  std::vector<Datatype> types;
  for (int i = 1; i <= 40; ++i) types.push_back(committed(Datatype::contiguous(i, Datatype::of<int16_t>())));
  types.push_back(Datatype::of<float>());
  for (int round = 0; round < 3; ++round) {
    for (const Datatype& type : types) {
      for (int64_t count = 1; count <= 5; ++count) {
        auto cached = cache.get(type, count);
        ASSERT_TRUE(cached.isOk());
        EXPECT_EQ(*cached, *datatype::signature(type, count));
      }
    }
  }
}

TEST(SignatureCache, RecycledTypeIdGetsItsNewSignature) {
  SignatureCache cache;
  Datatype first = committed(Datatype::contiguous(4, Datatype::of<int32_t>()));
  uint32_t id = first.id();
  ASSERT_TRUE(cache.get(first, 1).isOk());
  first.free();  // the last handle: the id goes back to the pool
  // Types made now may reuse the id with a new version; whichever does
  // must not be given the freed type's signature.
  std::vector<Datatype> later;
  for (int i = 0; i < 8; ++i) later.push_back(committed(Datatype::contiguous(4, Datatype::of<double>())));
  bool reused = false;
  for (const Datatype& type : later) {
    reused = reused || type.id() == id;
    auto cached = cache.get(type, 1);
    ASSERT_TRUE(cached.isOk());
    EXPECT_EQ(*cached, *datatype::signature(type, 1));
    EXPECT_NE(*cached, *datatype::signature(Datatype::of<int32_t>(), 4));
  }
  EXPECT_TRUE(reused) << "id " << id << " was not recycled: the test did not exercise reuse";
}

}  // namespace
}  // namespace ibdt::messaging
