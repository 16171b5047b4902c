// tests/datatype/constructors_test.cc — type maps and bounds of every
// constructor against hand-computed values, and the Bruck round types of
// Träff, Rougier, Hunold (2014), Listings 1 and 2, for p = 13.
#include <gtest/gtest.h>

#include <utility>

#include "ibdt/datatype.h"

namespace ibdt::datatype {
namespace {

using Map = std::vector<std::pair<int64_t, BasicKind>>;
const Datatype kI16 = Datatype::of<int16_t>();
const Datatype kI32 = Datatype::of<int32_t>();
const Datatype kF64 = Datatype::of<double>();
const Datatype kChar = Datatype::of<char>();

Map mapOf(const Datatype& t) {
  auto m = typeMap(t);
  EXPECT_TRUE(m.isOk()) << m.status().toString();
  Map out;
  if (m.isOk()) {
    for (const auto& e : *m) out.emplace_back(e.displacement, e.kind);
  }
  return out;
}

Map of(BasicKind k, std::initializer_list<int64_t> displs) {
  Map out;
  for (int64_t d : displs) out.emplace_back(d, k);
  return out;
}

void expectBounds(const Datatype& t, int64_t lb, int64_t ub, int64_t trueLb, int64_t trueUb, int64_t size) {
  EXPECT_EQ(t.lb(), lb);
  EXPECT_EQ(t.ub(), ub);
  EXPECT_EQ(t.extent(), ub - lb);
  EXPECT_EQ(t.trueLb(), trueLb);
  EXPECT_EQ(t.trueUb(), trueUb);
  EXPECT_EQ(t.trueExtent(), trueUb - trueLb);
  EXPECT_EQ(t.size(), size);
}

Datatype ok(Result<Datatype> r) {
  EXPECT_TRUE(r.isOk()) << r.status().toString();
  return r.isOk() ? r.value() : Datatype();
}

TEST(Constructors, Predefined) {
  EXPECT_EQ(Datatype::of<long double>().size(), static_cast<int64_t>(sizeof(long double)));
  EXPECT_EQ(Datatype::of<std::complex<double>>().size(), 16);
  EXPECT_EQ(Datatype::basic(BasicKind::kBool).size(), static_cast<int64_t>(sizeof(bool)));
  for (int k = 1; k <= kBasicKindCount; ++k) {
    const Datatype t = Datatype::basic(static_cast<BasicKind>(k));
    EXPECT_TRUE(t.committed());
    EXPECT_TRUE(t.contiguous());
    expectBounds(t, 0, t.size(), 0, t.size(), basicSize(static_cast<BasicKind>(k)));
  }
  EXPECT_FALSE(Datatype::basic(static_cast<BasicKind>(0)).valid());
}

TEST(Constructors, ContiguousAndVector) {
  EXPECT_EQ(mapOf(ok(Datatype::contiguous(3, kI32))), of(BasicKind::kInt32, {0, 4, 8}));
  const Datatype v = ok(Datatype::vector(2, 2, 3, kI32));
  EXPECT_EQ(mapOf(v), of(BasicKind::kInt32, {0, 4, 12, 16}));
  expectBounds(v, 0, 20, 0, 20, 16);
  const Datatype neg = ok(Datatype::vector(3, 1, -2, kF64));
  EXPECT_EQ(mapOf(neg), of(BasicKind::kDouble, {0, -16, -32}));
  expectBounds(neg, -32, 8, -32, 8, 24);
  const Datatype h = ok(Datatype::hvector(2, 1, 10, kI16));
  EXPECT_EQ(mapOf(h), of(BasicKind::kInt16, {0, 10}));
  expectBounds(h, 0, 12, 0, 12, 4);
  expectBounds(ok(Datatype::vector(0, 5, 3, kI32)), 0, 0, 0, 0, 0);
}

TEST(Constructors, IndexedFamily) {
  const int64_t bl[] = {2, 1}, d[] = {3, 0};
  const Datatype ix = ok(Datatype::indexed(bl, d, kI32));
  EXPECT_EQ(mapOf(ix), of(BasicKind::kInt32, {12, 16, 0}));
  expectBounds(ix, 0, 20, 0, 20, 12);
  const int64_t hbl[] = {1, 2}, hd[] = {5, -3};
  const Datatype hix = ok(Datatype::hindexed(hbl, hd, kChar));
  EXPECT_EQ(mapOf(hix), of(BasicKind::kChar, {5, -3, -2}));
  expectBounds(hix, -3, 6, -3, 6, 3);
  const int64_t bd[] = {4, 0};
  EXPECT_EQ(mapOf(ok(Datatype::indexedBlock(2, bd, kI16))), of(BasicKind::kInt16, {8, 10, 0, 2}));
  const int64_t hbd[] = {7, 1};
  const Datatype hb = ok(Datatype::hindexedBlock(1, hbd, kChar));
  EXPECT_EQ(mapOf(hb), of(BasicKind::kChar, {7, 1}));
  expectBounds(hb, 1, 8, 1, 8, 2);
}

TEST(Constructors, StructPadsToAlignmentUnlessResized) {
  const int64_t bl[] = {1, 1}, d[] = {0, 8};
  const Datatype types[] = {kF64, kChar};
  const Datatype s = ok(Datatype::structType(bl, d, types));
  EXPECT_EQ(mapOf(s), (Map{{0, BasicKind::kDouble}, {8, BasicKind::kChar}}));
  expectBounds(s, 0, 16, 0, 9, 9);  // {double; char} has extent 16 as in C
  const Datatype r9 = ok(Datatype::resized(kF64, 0, 9));
  const int64_t one[] = {1}, zero[] = {0};
  const Datatype sticky = ok(Datatype::structType(one, zero, {&r9, 1}));
  expectBounds(sticky, 0, 9, 0, 8, 8);
}

TEST(Constructors, ResizedAndDup) {
  const Datatype r = ok(Datatype::resized(kI32, -2, 10));
  EXPECT_EQ(mapOf(r), of(BasicKind::kInt32, {0}));
  expectBounds(r, -2, 8, 0, 4, 4);
  const Datatype c = ok(Datatype::contiguous(2, r));  // second copy at the new extent
  EXPECT_EQ(mapOf(c), of(BasicKind::kInt32, {0, 10}));
  const Datatype d = ok(Datatype::dup(c));
  EXPECT_NE(d.id(), c.id());
  EXPECT_EQ(mapOf(d), mapOf(c));
  expectBounds(d, c.lb(), c.ub(), c.trueLb(), c.trueUb(), c.size());
}

TEST(Constructors, Subarray) {
  const int64_t sizes[] = {3, 4}, subs[] = {2, 2}, starts[] = {1, 1};
  const Datatype cOrder = ok(Datatype::subarray(sizes, subs, starts, Order::kC, kI32));
  EXPECT_EQ(mapOf(cOrder), of(BasicKind::kInt32, {20, 24, 36, 40}));  // (r*4+c)*4
  expectBounds(cOrder, 0, 48, 20, 44, 16);
  const Datatype fOrder = ok(Datatype::subarray(sizes, subs, starts, Order::kFortran, kI32));
  EXPECT_EQ(mapOf(fOrder), of(BasicKind::kInt32, {16, 20, 28, 32}));  // (c*3+r)*4
}

TEST(Constructors, Darray) {
  const int64_t g[] = {4, 4}, p[] = {2, 2}, dflt[] = {kDefaultDistArg, kDefaultDistArg};
  const Distribution block[] = {Distribution::kBlock, Distribution::kBlock};
  const Datatype b = ok(Datatype::darray(4, 3, g, block, dflt, p, Order::kC, kI32));  // coords (1,1)
  EXPECT_EQ(mapOf(b), of(BasicKind::kInt32, {40, 44, 56, 60}));
  expectBounds(b, 0, 64, 40, 64, 16);
  const Datatype b1 = ok(Datatype::darray(4, 1, g, block, dflt, p, Order::kFortran, kI32));  // coords (0,1)
  EXPECT_EQ(mapOf(b1), of(BasicKind::kInt32, {32, 36, 48, 52}));  // rows 0-1, cols 2-3: (c*4+r)*4

  const int64_t g1[] = {14}, p1[] = {3}, two[] = {2};
  const Distribution cyclic[] = {Distribution::kCyclic};
  const Datatype c = ok(Datatype::darray(3, 1, g1, cyclic, two, p1, Order::kC, kI32));
  EXPECT_EQ(mapOf(c), of(BasicKind::kInt32, {8, 12, 32, 36}));  // elements 2,3,8,9
  expectBounds(c, 0, 56, 8, 40, 16);
  const Distribution none[] = {Distribution::kNone};
  const int64_t p0[] = {1}, d0[] = {kDefaultDistArg};
  EXPECT_EQ(mapOf(ok(Datatype::darray(1, 0, {g1, 1}, none, d0, p0, Order::kC, kChar))).size(), 14u);
}

TEST(Constructors, BoundedVector) {
  // Listing 1 example from the header: bound 9, blocks of 4 every 8.
  const Datatype t = ok(Datatype::boundedVector(9, 4, 8, kI32));
  EXPECT_EQ(mapOf(t), of(BasicKind::kInt32, {0, 4, 8, 12, 32}));
  expectBounds(t, 0, 36, 0, 36, 20);
  const Datatype cut = ok(Datatype::boundedVector(6, 4, 8, kI32));  // bound inside a gap
  EXPECT_EQ(mapOf(cut), of(BasicKind::kInt32, {0, 4, 8, 12}));
  expectBounds(cut, 0, 16, 0, 16, 16);
  EXPECT_EQ(mapOf(ok(Datatype::boundedVector(10, 2, 3, kChar))), of(BasicKind::kChar, {0, 1, 3, 4, 6, 7, 9}));
  EXPECT_EQ(ok(Datatype::boundedVector(0, 2, 3, kChar)).size(), 0);
}

TEST(Constructors, CircularVector) {
  // Header example (Listing 2, p = 13, k = 4, rank 3).
  EXPECT_EQ(mapOf(ok(Datatype::circularVector(13, 7, 9, 4, 8, kI32))), of(BasicKind::kInt32, {28, 32, 36, 40, 8}));
  // A block straddles the wrap: j in {0,1,2,4,5,6,8,9} from element 8 of 10.
  const Datatype t = ok(Datatype::circularVector(10, 8, 10, 3, 4, kChar));
  EXPECT_EQ(mapOf(t), of(BasicKind::kChar, {8, 9, 0, 2, 3, 4, 6, 7}));
  expectBounds(t, 0, 10, 0, 10, 8);
}

TEST(Constructors, Bucket) {
  const int64_t counts[] = {1, 3, 0};
  const Datatype t = ok(Datatype::bucket(4, counts, kI32));
  EXPECT_EQ(mapOf(t), of(BasicKind::kInt32, {0, 16, 20, 24}));
  expectBounds(t, 0, 48, 0, 28, 16);
}

// Packs one element of `type` from R (R[i] = i) displaced by `offset` elements.
std::vector<int32_t> selected(const Datatype& type, int64_t offset, int64_t p) {
  std::vector<int32_t> r(static_cast<size_t>(p));
  for (int64_t i = 0; i < p; ++i) r[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  EXPECT_TRUE(Datatype(type).commit().isOk());
  auto seg = Segment::create(type, 1);
  EXPECT_TRUE(seg.isOk());
  std::vector<int32_t> out(static_cast<size_t>(type.size() / 4));
  EXPECT_TRUE(seg->pack(r.data() + offset, 0, seg->size(), out.data()).isOk());
  return out;
}

// Figure 1, round k = 2 (the listings' k = 4): Basic Bruck sends R[j] with
// bit 2 of j set; Modified Bruck sends R[(i+j) % p] for the same j.
TEST(BruckRounds, ListingsSelectFigureOneElementsForP13) {
  const int64_t p = 13;
  const std::vector<int32_t> bit2 = {4, 5, 6, 7, 12};
  const Datatype basic = ok(Datatype::boundedVector(p - 4, 4, 8, kI32));
  EXPECT_EQ(selected(basic, 4, p), bit2);
  for (int64_t rank = 0; rank < p; ++rank) {
    const int64_t recvrank = (rank + 4) % p;
    const Datatype modified = ok(Datatype::circularVector(p, recvrank, p - 4, 4, 8, kI32));
    std::vector<int32_t> want;
    for (int32_t j : bit2) want.push_back(static_cast<int32_t>((rank + j) % p));
    EXPECT_EQ(selected(modified, 0, p), want) << "rank " << rank;
  }
  // Every round k of Listing 1 selects exactly the j in [k, p) with j & k.
  for (int64_t k = 1; k < p; k <<= 1) {
    std::vector<int32_t> want;
    for (int32_t j = static_cast<int32_t>(k); j < p; ++j) {
      if (j & k) want.push_back(j);
    }
    EXPECT_EQ(selected(ok(Datatype::boundedVector(p - k, k, 2 * k, kI32)), k, p), want) << "k " << k;
  }
}

}  // namespace
}  // namespace ibdt::datatype
