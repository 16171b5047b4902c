// tests/datatype/segment_test.cc — segment behaviour that random small types
// do not reach: huge regular types (seek and statistics without walking),
// contiguity, and concurrent use of one type from several threads.
#include <gtest/gtest.h>

#include <numeric>
#include <thread>

#include "ibdt/datatype.h"

namespace ibdt::datatype {
namespace {

TEST(Segment, HugeRegularTypesSeekAndSummariseWithoutWalking) {
  const int64_t blocks = int64_t{1} << 40;  // 8 TiB of data: nothing may walk it
  auto v = Datatype::vector(blocks, 1, 3, Datatype::of<double>());
  ASSERT_TRUE(v.isOk() && v->commit().isOk());
  auto seg = Segment::create(*v, 2);
  ASSERT_TRUE(seg.isOk());
  ASSERT_EQ(seg->size(), 2 * blocks * 8);
  Iovec iov[4];
  // The last 20 bytes: 4 bytes of a double, then the last two doubles.
  auto fill = seg->iovecs(1000, seg->size() - 20, seg->size(), iov, 4);
  ASSERT_TRUE(fill.isOk());
  ASSERT_EQ(fill->entries, 3u);
  const uint64_t extent = static_cast<uint64_t>(v->extent());
  const uint64_t lastBlock = 1000 + extent + static_cast<uint64_t>((blocks - 1) * 24);
  EXPECT_EQ(iov[2].address, lastBlock);
  EXPECT_EQ(iov[2].length, 8u);
  EXPECT_EQ(iov[1].address, lastBlock - 24);
  EXPECT_EQ(iov[0].address, lastBlock - 48 + 4);
  EXPECT_EQ(iov[0].length, 4u);

  auto st = stats(*v, 1);
  ASSERT_TRUE(st.isOk());
  EXPECT_EQ(st->blockCount, blocks);
  EXPECT_EQ(st->medianBlock, 8.0);
  EXPECT_EQ(st->meanBlock, 8.0);
  EXPECT_EQ(st->stddevBlock, 0.0);
  EXPECT_FALSE(st->contiguous);
  auto sig = signature(*v, 2);
  ASSERT_TRUE(sig.isOk());
  EXPECT_EQ(sig->elements, 2 * blocks);
}

TEST(Segment, StatisticsOfMixedBlocks) {
  // Blocks of 1, 2, 3 ints with one-int gaps; element extent 28 bytes.
  const int64_t bl[] = {1, 2, 3}, d[] = {0, 2, 5};
  auto t = Datatype::indexed(bl, d, Datatype::of<int32_t>());
  ASSERT_TRUE(t.isOk() && t->commit().isOk());
  auto st = stats(*t, 1000);
  ASSERT_TRUE(st.isOk());
  // The 12-byte last block of one element touches the 4-byte first block of
  // the next: 1000 elements give 2001 runs: 8 (x1000), 16 (x999), 4 and 12.
  EXPECT_EQ(st->blockCount, 2001);
  EXPECT_EQ(st->medianBlock, 8.0);
  EXPECT_DOUBLE_EQ(st->meanBlock, 24000.0 / 2001);
  auto flat = flatten(*t, 1000);
  ASSERT_TRUE(flat.isOk());
  EXPECT_EQ(static_cast<int64_t>(flat->size()), st->blockCount);
}

TEST(Segment, ContiguousTypesAreOneRun) {
  auto c = Datatype::contiguous(5, Datatype::of<int16_t>());
  ASSERT_TRUE(c.isOk() && c->commit().isOk());
  EXPECT_TRUE(c->contiguous());
  auto st = stats(*c, 100);
  ASSERT_TRUE(st.isOk());
  EXPECT_EQ(st->blockCount, 1);
  EXPECT_TRUE(st->contiguous);
  auto gap = Datatype::resized(*c, 0, 12);
  ASSERT_TRUE(gap.isOk() && gap->commit().isOk());
  EXPECT_FALSE(gap->contiguous());
}

TEST(Segment, OneTypeFromManyThreads) {
  auto t = Datatype::vector(1000, 3, 5, Datatype::of<int32_t>());
  ASSERT_TRUE(t.isOk());
  Datatype shared = *t;  // committed concurrently by the threads below
  std::vector<int32_t> src(5000);
  std::iota(src.begin(), src.end(), 0);
  std::vector<int> failures(4, 0);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      Datatype mine = shared;
      if (!mine.commit().isOk()) ++failures[k];
      auto seg = Segment::create(mine, 1);
      if (!seg.isOk()) {
        ++failures[k];
        return;
      }
      std::vector<int32_t> out(3000);
      for (int rep = 0; rep < 50; ++rep) {
        const int64_t cut = (rep * 997) % seg->size();
        if (!seg->pack(src.data(), 0, cut, out.data()).isOk()) ++failures[k];
        if (!seg->pack(src.data(), cut, seg->size(), reinterpret_cast<char*>(out.data()) + cut).isOk()) ++failures[k];
        for (int64_t i = 0; i < 3000; ++i) {
          if (out[static_cast<size_t>(i)] != (i / 3) * 5 + i % 3) ++failures[k];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace ibdt::datatype
