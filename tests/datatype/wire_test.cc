// tests/datatype/wire_test.cc — the wire format: round trips, layouts walked
// against a remote base, hand-made hostile blobs and thousands of mutations.
#include <gtest/gtest.h>

#include <random>

#include "reference.h"
#include "wire_fuzz_common.h"

namespace ibdt::datatype {
namespace {

std::vector<uint8_t> blobOf(const Datatype& t) {
  auto b = serialize(t);
  EXPECT_TRUE(b.isOk()) << b.status().toString();
  return b.isOk() ? *b : std::vector<uint8_t>{};
}

TEST(Wire, RegularTypesAreCompact) {
  auto v = Datatype::vector(1 << 20, 1, 4, Datatype::of<double>());
  ASSERT_TRUE(v.isOk() && v->commit().isOk());
  const auto blob = blobOf(*v);
  EXPECT_LT(blob.size(), 64u) << "a vector of a million blocks is one loop node";
  auto back = deserialize(blob);
  ASSERT_TRUE(back.isOk());
  EXPECT_EQ(back->size(), v->size());
  EXPECT_EQ(back->extent(), v->extent());
  EXPECT_TRUE(back->committed());
  auto s1 = stats(*v, 2), s2 = stats(*back, 2);
  ASSERT_TRUE(s1.isOk() && s2.isOk());
  EXPECT_EQ(s1->blockCount, s2->blockCount);
  EXPECT_EQ(s1->blockCount, (2 << 20) - 1);  // element 1 starts where element 0 ends: one merge
}

TEST(Wire, RemoteLayoutGivesTheReceiversAddresses) {
  const int64_t bl[] = {2, 1, 3}, d[] = {0, 5, 9};
  auto t = Datatype::indexed(bl, d, Datatype::of<int32_t>());
  ASSERT_TRUE(t.isOk() && t->commit().isOk());
  auto remote = deserialize(blobOf(*t));
  ASSERT_TRUE(remote.isOk());
  auto seg = Segment::create(*remote, 2);
  ASSERT_TRUE(seg.isOk());
  Iovec iov[8];
  auto fill = seg->iovecs(0x7f0000001000, 0, seg->size(), iov, 8);
  ASSERT_TRUE(fill.isOk());
  // Element extent 48: runs (0,8) (20,4) (36,12) then (48,8) (68,4) (84,12).
  const std::vector<std::pair<uint64_t, uint64_t>> want = {{0, 8}, {20, 4}, {36, 20}, {68, 4}, {84, 12}};
  ASSERT_EQ(fill->entries, want.size());  // (36,12) and (48,8) touch: merged
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(iov[i].address, 0x7f0000001000 + want[i].first);
    EXPECT_EQ(iov[i].length, want[i].second);
  }
  EXPECT_EQ(fill->bytes, 48);
}

TEST(Wire, HostileBlobsAreRejected) {
  auto v = Datatype::vector(3, 2, 5, Datatype::of<int16_t>());
  ASSERT_TRUE(v.isOk() && v->commit().isOk());
  const std::vector<uint8_t> good = blobOf(*v);
  ASSERT_TRUE(deserialize(good).isOk());
  auto code = [](std::vector<uint8_t> b) {
    auto r = deserialize(b);
    return r.isOk() ? Code::kOk : r.status().code();
  };
  EXPECT_EQ(code({}), Code::kProtocol);
  EXPECT_EQ(code({'i', 'b', 'd', 'x', 1}), Code::kProtocol);
  EXPECT_EQ(code({'i', 'b', 'd', 't', 2}), Code::kProtocol);  // unknown version
  for (size_t cut = 0; cut < good.size(); ++cut) {
    EXPECT_EQ(code({good.begin(), good.begin() + static_cast<ptrdiff_t>(cut)}), Code::kProtocol) << "cut " << cut;
  }
  std::vector<uint8_t> trailing = good;
  trailing.push_back(0);
  EXPECT_EQ(code(trailing), Code::kProtocol);

  // Hand-written headers: size 8, lb 0, ub 8, hash 0, 8 elements, byte-typed, id, version.
  const std::vector<uint8_t> head = {'i', 'b', 'd', 't', 1, 8, 0, 16, 0, 8, 1, 0, 0};
  auto with = [&](std::vector<uint8_t> tail) {
    std::vector<uint8_t> b = head;
    b.insert(b.end(), tail.begin(), tail.end());
    return b;
  };
  EXPECT_EQ(code(with({1, 1, 1, 8, 0, 1, 0})), Code::kOk);  // one run of 8 bytes
  EXPECT_EQ(code(with({1, 1, 1, 9, 0, 1, 0})), Code::kProtocol);  // size does not match
  EXPECT_EQ(code(with({1, 1, 1, 8, 0, 2, 0})), Code::kProtocol);  // root index past the table
  EXPECT_EQ(code(with({1, 7, 1, 8, 0, 1, 0})), Code::kProtocol);  // unknown node kind
  EXPECT_EQ(code(with({1, 3, 0xff, 0xff, 0xff, 0xff, 0x0f, 1, 0})), Code::kProtocol);  // 2^32 displacements claimed
  EXPECT_EQ(code(with({1, 4, 1, 0, 0, 1, 0})), Code::kProtocol);  // child refers to itself
  // Count x stride overflows 64 bits.
  EXPECT_EQ(code(with({1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f, 1,
                       0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f, 1, 0})),
            Code::kProtocol);
  // A chain of 100 one-element vectors is deeper than allowed.
  std::vector<uint8_t> deep = head;
  deep.push_back(100);
  deep.insert(deep.end(), {1, 1, 8, 0});
  for (uint8_t i = 1; i < 100; ++i) deep.insert(deep.end(), {4, 2, static_cast<uint8_t>(i - 1), 0});
  deep.insert(deep.end(), {100, 0});
  EXPECT_EQ(code(deep), Code::kProtocol);
}

// The CI stand-in for the libFuzzer target: thousands of mutated blobs of
// random types. None may crash, hang or allocate wildly (ASan watches).
TEST(Wire, MutatedBlobsNeverCrash) {
  testing::TypeGenerator gen(0x5eed);
  std::vector<std::vector<uint8_t>> corpus;
  for (int i = 0; i < 40; ++i) {
    testing::RandomType rt = gen.make(3, 256);
    if (rt.type.commit().isOk()) corpus.push_back(blobOf(rt.type));
  }
  std::mt19937_64 rng(42);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % std::max<size_t>(n, 1)); };
  int decoded = 0;
  for (int iter = 0; iter < 5000; ++iter) {
    std::vector<uint8_t> b = corpus[pick(corpus.size())];
    for (int m = 1 + static_cast<int>(pick(4)); m > 0; --m) {
      switch (pick(5)) {
        case 0: if (!b.empty()) b[pick(b.size())] ^= static_cast<uint8_t>(1u << pick(8)); break;
        case 1: if (!b.empty()) b[pick(b.size())] = static_cast<uint8_t>(rng()); break;
        case 2: b.resize(pick(b.size() + 1)); break;
        case 3: b.insert(b.begin() + static_cast<ptrdiff_t>(pick(b.size() + 1)), static_cast<uint8_t>(rng())); break;
        default: if (!b.empty()) b[pick(b.size())] = 0xff; break;
      }
    }
    decoded += testing::exerciseBlob(b) ? 1 : 0;
  }
  EXPECT_GT(decoded, 0) << "some mutations should still decode (e.g. changed displacements)";
}

}  // namespace
}  // namespace ibdt::datatype
