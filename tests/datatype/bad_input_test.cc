// tests/datatype/bad_input_test.cc — invalid arguments give clear errors and
// write nothing; ids are recycled only with a new version.
#include <gtest/gtest.h>

#include <limits>

#include "ibdt/datatype.h"

namespace ibdt::datatype {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
const Datatype kF64 = Datatype::of<double>();

template <typename T>
Code codeOf(const Result<T>& r) {
  return r.isOk() ? Code::kOk : r.status().code();
}

TEST(BadInput, NegativeCountsAndLengths) {
  const int64_t neg[] = {-1}, zero[] = {0};
  EXPECT_EQ(codeOf(Datatype::contiguous(-1, kF64)), Code::kInvalidArgument);
  EXPECT_EQ(codeOf(Datatype::vector(-2, 1, 1, kF64)), Code::kInvalidArgument);
  EXPECT_EQ(codeOf(Datatype::hvector(2, -1, 8, kF64)), Code::kInvalidArgument);
  EXPECT_EQ(codeOf(Datatype::indexed(neg, zero, kF64)), Code::kInvalidArgument);
  EXPECT_EQ(codeOf(Datatype::hindexedBlock(-1, zero, kF64)), Code::kInvalidArgument);
  EXPECT_EQ(codeOf(Datatype::structType(neg, zero, {&kF64, 1})), Code::kInvalidArgument);
  EXPECT_EQ(codeOf(Datatype::resized(kF64, 0, -8)), Code::kInvalidArgument);
  EXPECT_EQ(codeOf(Segment::create(kF64, -1)), Code::kInvalidArgument);
  auto r = Datatype::vector(-2, 1, 1, kF64);
  EXPECT_NE(r.status().message().find("negative count -2"), std::string_view::npos) << r.status().toString();
}

TEST(BadInput, MismatchedArraysAndPatterns) {
  const int64_t two[] = {1, 1}, one[] = {0};
  EXPECT_EQ(codeOf(Datatype::hindexed(two, one, kF64)), Code::kInvalidArgument);
  EXPECT_EQ(codeOf(Datatype::boundedVector(8, 2, 0, kF64)), Code::kInvalidArgument);
  EXPECT_EQ(codeOf(Datatype::boundedVector(8, 3, 2, kF64)), Code::kInvalidArgument);
  EXPECT_EQ(codeOf(Datatype::circularVector(8, 8, 4, 1, 2, kF64)), Code::kInvalidArgument);
  EXPECT_EQ(codeOf(Datatype::circularVector(8, 0, 9, 1, 2, kF64)), Code::kInvalidArgument);
  const int64_t tooMany[] = {5};
  EXPECT_EQ(codeOf(Datatype::bucket(4, tooMany, kF64)), Code::kInvalidArgument);
  const int64_t sizes[] = {4}, subs[] = {3}, starts[] = {2};
  EXPECT_EQ(codeOf(Datatype::subarray(sizes, subs, starts, Order::kC, kF64)), Code::kInvalidArgument);
  const int64_t g[] = {8}, p[] = {2}, d[] = {kDefaultDistArg}, small[] = {3};
  const Distribution block[] = {Distribution::kBlock};
  EXPECT_EQ(codeOf(Datatype::darray(3, 0, g, block, d, p, Order::kC, kF64)), Code::kInvalidArgument);
  EXPECT_EQ(codeOf(Datatype::darray(2, 2, g, block, d, p, Order::kC, kF64)), Code::kInvalidArgument);
  EXPECT_EQ(codeOf(Datatype::darray(2, 0, g, block, small, p, Order::kC, kF64)), Code::kInvalidArgument);
}

TEST(BadInput, OverflowIsAnErrorNotAWrap) {
  EXPECT_EQ(codeOf(Datatype::contiguous(kMax / 4, kF64)), Code::kOverflow);
  EXPECT_EQ(codeOf(Datatype::hvector(3, 1, kMax / 2, kF64)), Code::kOverflow);
  EXPECT_EQ(codeOf(Datatype::vector(2, 1, kMax / 4, kF64)), Code::kOverflow);
  const int64_t one[] = {1}, far[] = {kMax / 4};
  EXPECT_EQ(codeOf(Datatype::indexed(one, far, kF64)), Code::kOverflow);
  EXPECT_EQ(codeOf(Datatype::resized(kF64, kMax - 4, 8)), Code::kOverflow);
  auto big = Datatype::contiguous(kMax / 16, kF64);
  ASSERT_TRUE(big.isOk());
  ASSERT_TRUE(big->commit().isOk());
  EXPECT_EQ(codeOf(Segment::create(*big, 3)), Code::kOverflow);
  EXPECT_EQ(codeOf(signature(*big, 1000)), Code::kOverflow);
}

TEST(BadInput, NullUncommittedAndFreedHandles) {
  EXPECT_EQ(codeOf(Segment::create(Datatype(), 1)), Code::kInvalidArgument);
  EXPECT_EQ(codeOf(Datatype::contiguous(2, Datatype())), Code::kInvalidArgument);
  auto v = Datatype::vector(4, 1, 2, kF64);
  ASSERT_TRUE(v.isOk());
  auto seg = Segment::create(*v, 1);
  EXPECT_EQ(codeOf(seg), Code::kState);
  EXPECT_NE(seg.status().message().find("not committed"), std::string_view::npos);
  EXPECT_EQ(codeOf(serialize(*v)), Code::kState);
  EXPECT_EQ(codeOf(stats(*v, 1)), Code::kState);
  Datatype t = *v;
  ASSERT_TRUE(t.commit().isOk());
  EXPECT_TRUE(Segment::create(t, 1).isOk());
  Datatype copy = t;
  t.free();
  EXPECT_EQ(codeOf(Segment::create(t, 1)), Code::kState);
  EXPECT_EQ(t.commit().code(), Code::kState);
  EXPECT_EQ(codeOf(Datatype::contiguous(1, t)), Code::kState);
  EXPECT_TRUE(Segment::create(copy, 1).isOk()) << "other handles stay usable";
}

TEST(BadInput, RangesOutsideTheDataWriteNothing) {
  auto v = Datatype::vector(4, 1, 2, kF64);
  ASSERT_TRUE(v.isOk() && v->commit().isOk());
  auto seg = Segment::create(*v, 2);
  ASSERT_TRUE(seg.isOk());
  ASSERT_EQ(seg->size(), 64);
  std::vector<double> typed(16, 1.0);
  std::vector<uint8_t> out(128, 0xA5);
  const std::pair<int64_t, int64_t> bad[] = {{-1, 8}, {8, 4}, {0, 65}, {65, 66}};
  for (auto [first, last] : bad) {
    EXPECT_EQ(seg->pack(typed.data(), first, last, out.data()).code(), Code::kOutOfRange);
    EXPECT_EQ(seg->unpack(typed.data(), first, last, out.data()).code(), Code::kOutOfRange);
    Iovec iov[4];
    EXPECT_EQ(codeOf(seg->iovecs(0, first, last, iov, 4)), Code::kOutOfRange);
  }
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](uint8_t b) { return b == 0xA5; }));
  EXPECT_TRUE(std::all_of(typed.begin(), typed.end(), [](double x) { return x == 1.0; }));
  EXPECT_EQ(seg->seek(65).code(), Code::kOutOfRange);
  EXPECT_EQ(codeOf(seg->packNext(typed.data(), out.data(), -1)), Code::kInvalidArgument);
  ASSERT_TRUE(seg->seek(60).isOk());
  auto n = seg->packNext(typed.data(), out.data(), 100);  // clipped at the end of the data
  ASSERT_TRUE(n.isOk());
  EXPECT_EQ(*n, 4);
  EXPECT_EQ(out[4], 0xA5);
}

TEST(BadInput, SignatureMismatchAndTruncation) {
  const Datatype i32 = Datatype::of<int32_t>();
  EXPECT_EQ(checkMatch(i32, 1, kF64, 1).code(), Code::kInvalidArgument);
  EXPECT_EQ(checkMatch(i32, 2, kF64, 1).code(), Code::kTruncated);  // 2 elements into 1
  EXPECT_EQ(checkMatch(kF64, 3, kF64, 2).code(), Code::kTruncated);
  EXPECT_TRUE(checkMatch(kF64, 2, kF64, 3).isOk());
  std::vector<double> a(4, 2.0), b(4, 0.0);
  EXPECT_EQ(transpack(a.data(), i32, 4, b.data(), kF64, 2, 0, 16).code(), Code::kInvalidArgument);
  EXPECT_EQ(transpack(a.data(), kF64, 4, b.data(), kF64, 2, 0, 32).code(), Code::kOutOfRange);
  EXPECT_TRUE(std::all_of(b.begin(), b.end(), [](double x) { return x == 0.0; }));
}

TEST(Identity, IdsAreReusedOnlyWithANewVersion) {
  std::vector<std::pair<uint32_t, uint32_t>> seen;
  for (int i = 0; i < 50; ++i) {
    auto t = Datatype::contiguous(i, kF64);
    ASSERT_TRUE(t.isOk());
    const std::pair<uint32_t, uint32_t> key{t->id(), t->version()};
    EXPECT_EQ(std::count(seen.begin(), seen.end(), key), 0) << "id " << key.first << " version " << key.second;
    seen.push_back(key);
  }  // each type dies at the end of its iteration, so ids repeat
  std::sort(seen.begin(), seen.end());
  EXPECT_LT(std::unique(seen.begin(), seen.end(), [](auto& a, auto& b) { return a.first == b.first; }) - seen.begin(),
            50);
}

}  // namespace
}  // namespace ibdt::datatype
