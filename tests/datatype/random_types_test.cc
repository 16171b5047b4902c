// tests/datatype/random_types_test.cc — thousands of seeded random (type,
// count) pairs: every engine operation agrees byte for byte with the
// reference interpreter. A failure prints its seed and the type.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "reference.h"

namespace ibdt::datatype::testing {
namespace {

constexpr uint8_t kGuard = 0xA5;
constexpr int64_t kGuardBytes = 64;

// A typed buffer covering exactly the offsets a layout touches, plus guards.
struct TypedBuffer {
  std::vector<uint8_t> mem;
  int64_t lo = 0;
  explicit TypedBuffer(const std::vector<int64_t>& offsets) {
    int64_t hi = 0;
    if (!offsets.empty()) {
      lo = *std::min_element(offsets.begin(), offsets.end());
      hi = *std::max_element(offsets.begin(), offsets.end()) + 1;
    }
    mem.assign(static_cast<size_t>(hi - lo + 2 * kGuardBytes), kGuard);
  }
  uint8_t* base() { return mem.data() + kGuardBytes - lo; }
  uint8_t& at(int64_t offset) { return base()[offset]; }
};

std::vector<int64_t> randomCuts(TypeGenerator& gen, int64_t size) {
  std::vector<int64_t> cuts{0, size};
  for (int64_t k = gen.uniform(0, 4); k > 0; --k) cuts.push_back(gen.uniform(0, size));
  std::sort(cuts.begin(), cuts.end());
  return cuts;
}

// A prepared TypedCopy over a random range, on each of its paths: into a
// dense layout (packed in place), out of one (unpacked in place) and
// between two layouts of the random type (bounce buffer). Nothing outside
// the range may be written.
void checkTypedCopy(TypeGenerator& gen, const Datatype& type, int64_t count, const Datatype& flatType,
                    const std::vector<int64_t>& offsets, TypedBuffer& src, const std::vector<uint8_t>& expected) {
  const int64_t size = static_cast<int64_t>(expected.size());
  const int64_t first = gen.uniform(0, size), last = gen.uniform(first, size);
  SCOPED_TRACE(::testing::Message() << "typed copy of [" << first << ", " << last << ")");
  auto inRange = [&](int64_t i) { return i >= first && i < last; };
  // Expected typed buffer after unpacking expected[first, last) into a
  // guard-filled one (later type-map entries win where they overlap).
  TypedBuffer want(offsets);
  for (int64_t i = first; i < last; ++i) want.at(offsets[static_cast<size_t>(i)]) = expected[static_cast<size_t>(i)];

  auto toFlat = TypedCopy::create(type, count, flatType, 1);
  ASSERT_TRUE(toFlat.isOk()) << toFlat.status().toString();
  ASSERT_EQ(toFlat->size(), size);
  std::vector<uint8_t> flat(static_cast<size_t>(size + kGuardBytes), kGuard);
  ASSERT_TRUE(toFlat->run(src.base(), flat.data(), first, last).isOk());
  for (int64_t i = 0; i < size + kGuardBytes; ++i) {
    ASSERT_EQ(flat[static_cast<size_t>(i)], inRange(i) ? expected[static_cast<size_t>(i)] : kGuard) << "byte " << i;
  }

  auto fromFlat = TypedCopy::create(flatType, 1, type, count);
  ASSERT_TRUE(fromFlat.isOk()) << fromFlat.status().toString();
  TypedBuffer unpacked(offsets);
  ASSERT_TRUE(fromFlat->run(expected.data(), unpacked.base(), first, last).isOk());
  ASSERT_EQ(unpacked.mem, want.mem);

  auto typed = TypedCopy::create(type, count, type, count);
  ASSERT_TRUE(typed.isOk()) << typed.status().toString();
  TypedBuffer copied(offsets);
  ASSERT_TRUE(typed->run(src.base(), copied.base(), first, last).isOk());
  ASSERT_EQ(copied.mem, want.mem);
  EXPECT_EQ(typed->run(src.base(), copied.base(), 0, size + 1).code(), Code::kOutOfRange);
}

void checkOne(uint64_t seed) {
  TypeGenerator gen(seed);
  RandomType rt = gen.make(static_cast<int>(1 + seed % 5), 512);
  const int64_t count = gen.uniform(0, 3);
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " count " << count << " type " << rt.description);
  for (const std::string& e : gen.errors()) ADD_FAILURE() << "constructor rejected valid arguments: " << e;
  Datatype& type = rt.type;
  const Ref& ref = rt.ref;

  // Bounds and type map.
  ASSERT_EQ(type.size(), ref.size());
  ASSERT_EQ(type.lb(), ref.lb);
  ASSERT_EQ(type.ub(), ref.ub);
  ASSERT_EQ(type.trueLb(), ref.trueLb());
  ASSERT_EQ(type.trueUb(), ref.trueUb());
  auto map = typeMap(type);
  ASSERT_TRUE(map.isOk()) << map.status().toString();
  ASSERT_EQ(map->size(), ref.map.size());
  for (size_t i = 0; i < ref.map.size(); ++i) {
    ASSERT_EQ((*map)[i].displacement, ref.map[i].disp) << "entry " << i;
    ASSERT_EQ((*map)[i].kind, ref.map[i].kind) << "entry " << i;
  }
  ASSERT_TRUE(type.commit().isOk());

  auto seg = Segment::create(type, count);
  ASSERT_TRUE(seg.isOk()) << seg.status().toString();
  const std::vector<int64_t> offsets = refByteOffsets(ref, count);
  const int64_t size = static_cast<int64_t>(offsets.size());
  ASSERT_EQ(seg->size(), size);

  // Pack: whole, in random pieces, and streamed.
  TypedBuffer src(offsets);
  for (auto& b : src.mem) b = static_cast<uint8_t>(gen.uniform(0, 255));
  std::vector<uint8_t> expected(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) expected[static_cast<size_t>(i)] = src.at(offsets[static_cast<size_t>(i)]);
  std::vector<uint8_t> packed(static_cast<size_t>(size + kGuardBytes), kGuard);
  ASSERT_TRUE(seg->pack(src.base(), 0, size, packed.data()).isOk());
  ASSERT_TRUE(std::equal(expected.begin(), expected.end(), packed.begin()));
  ASSERT_TRUE(std::all_of(packed.begin() + size, packed.end(), [](uint8_t b) { return b == kGuard; }));

  std::vector<uint8_t> pieces(static_cast<size_t>(size));
  const std::vector<int64_t> cuts = randomCuts(gen, size);
  for (size_t k = 0; k + 1 < cuts.size(); ++k) {
    ASSERT_TRUE(seg->pack(src.base(), cuts[k], cuts[k + 1], pieces.data() + cuts[k]).isOk());
  }
  ASSERT_EQ(pieces, expected) << "pieces cut at random points";

  std::vector<uint8_t> streamed(static_cast<size_t>(size));
  for (int64_t at = 0; at < size;) {
    auto n = seg->packNext(src.base(), streamed.data() + at, gen.uniform(1, 40));
    ASSERT_TRUE(n.isOk());
    at += *n;
  }
  ASSERT_EQ(streamed, expected);

  // Unpack, whole and in pieces: later type-map entries win where they overlap.
  std::vector<uint8_t> input(static_cast<size_t>(size));
  for (auto& b : input) b = static_cast<uint8_t>(gen.uniform(0, 255));
  TypedBuffer want(offsets);
  for (int64_t i = 0; i < size; ++i) want.at(offsets[static_cast<size_t>(i)]) = input[static_cast<size_t>(i)];
  TypedBuffer whole(offsets), split(offsets);
  ASSERT_TRUE(seg->unpack(whole.base(), 0, size, input.data()).isOk());
  ASSERT_EQ(whole.mem, want.mem);
  const std::vector<int64_t> cuts2 = randomCuts(gen, size);
  for (size_t k = 0; k + 1 < cuts2.size(); ++k) {
    ASSERT_TRUE(seg->unpack(split.base(), cuts2[k], cuts2[k + 1], input.data() + cuts2[k]).isOk());
  }
  ASSERT_EQ(split.mem, want.mem);

  // Flatten and statistics.
  const std::vector<Block> runs = refRuns(ref, count);
  auto flat = flatten(type, count);
  ASSERT_TRUE(flat.isOk());
  ASSERT_EQ(*flat, runs);
  auto st = stats(type, count);
  ASSERT_TRUE(st.isOk());
  ASSERT_EQ(st->size, size);
  ASSERT_EQ(st->blockCount, static_cast<int64_t>(runs.size()));
  if (!runs.empty()) {
    std::vector<int64_t> lens;
    for (const Block& b : runs) lens.push_back(b.length);
    std::sort(lens.begin(), lens.end());
    const double mean = static_cast<double>(size) / static_cast<double>(lens.size());
    double var = 0;
    for (int64_t l : lens) var += (static_cast<double>(l) - mean) * (static_cast<double>(l) - mean);
    EXPECT_DOUBLE_EQ(st->meanBlock, mean);
    EXPECT_EQ(st->medianBlock, static_cast<double>(lens[(lens.size() - 1) / 2]));
    EXPECT_NEAR(st->stddevBlock, std::sqrt(var / static_cast<double>(lens.size())), 1e-9 * (1 + mean));
  }

  // Scatter/gather lists of a random range, against a "remote" base address,
  // through a tiny output array so that the list comes in several calls.
  const uint64_t remote = uint64_t{1} << 40;
  const int64_t first = gen.uniform(0, size), last = gen.uniform(first, size);
  std::vector<Block> got;
  for (int64_t at = first; at < last;) {
    Iovec iov[3];
    auto fill = seg->iovecs(remote, at, last, iov, static_cast<size_t>(gen.uniform(1, 3)));
    ASSERT_TRUE(fill.isOk());
    ASSERT_GT(fill->entries, 0u);
    int64_t covered = 0;
    for (size_t k = 0; k < fill->entries; ++k) {
      const Block b{static_cast<int64_t>(iov[k].address - remote), static_cast<int64_t>(iov[k].length)};
      covered += b.length;
      if (!got.empty() && got.back().offset + got.back().length == b.offset) {
        got.back().length += b.length;
      } else {
        got.push_back(b);
      }
    }
    ASSERT_EQ(covered, fill->bytes);
    at += fill->bytes;
  }
  std::vector<Block> wantRange;
  for (int64_t i = first; i < last; ++i) {
    const int64_t off = offsets[static_cast<size_t>(i)];
    if (!wantRange.empty() && wantRange.back().offset + wantRange.back().length == off) {
      ++wantRange.back().length;
    } else {
      wantRange.push_back({off, 1});
    }
  }
  ASSERT_EQ(got, wantRange);

  // Wire format round trip: the received layout packs the same bytes.
  auto blob = serialize(type);
  ASSERT_TRUE(blob.isOk());
  auto remoteType = deserialize(*blob);
  ASSERT_TRUE(remoteType.isOk()) << remoteType.status().toString();
  ASSERT_EQ(remoteType->size(), type.size());
  ASSERT_EQ(remoteType->lb(), type.lb());
  ASSERT_EQ(remoteType->extent(), type.extent());
  ASSERT_EQ(remoteType->trueLb(), type.trueLb());
  ASSERT_EQ(remoteType->trueUb(), type.trueUb());
  auto remoteSeg = Segment::create(*remoteType, count);
  ASSERT_TRUE(remoteSeg.isOk());
  std::fill(packed.begin(), packed.end(), 0);
  ASSERT_TRUE(remoteSeg->pack(src.base(), 0, size, packed.data()).isOk());
  ASSERT_TRUE(std::equal(expected.begin(), expected.end(), packed.begin()));
  ASSERT_TRUE(checkMatch(*remoteType, count, type, count).isOk());

  // Signature: a packed struct of the same basic types matches; transpack
  // into it gives the packed bytes.
  std::vector<int64_t> ones, displs;
  std::vector<Datatype> kinds;
  int64_t at = 0;
  for (int64_t i = 0; i < count; ++i) {
    for (const RefEntry& e : ref.map) {
      ones.push_back(1);
      displs.push_back(at);
      kinds.push_back(Datatype::basic(e.kind));
      at += e.size();
    }
  }
  auto flatType = Datatype::structType(ones, displs, kinds);
  ASSERT_TRUE(flatType.isOk());
  ASSERT_TRUE(flatType->commit().isOk());
  ASSERT_TRUE(checkMatch(type, count, *flatType, 1).isOk());
  ASSERT_TRUE(checkMatch(*flatType, 1, type, count + 1).isOk());
  if (size > 0) {
    EXPECT_EQ(checkMatch(type, count + 1, *flatType, 1).code(), Code::kTruncated);
    std::vector<uint8_t> copy(static_cast<size_t>(size));
    ASSERT_TRUE(transpack(src.base(), type, count, copy.data(), *flatType, 1, 0, size).isOk());
    ASSERT_EQ(copy, expected);
    checkTypedCopy(gen, type, count, *flatType, offsets, src, expected);
  }
}

TEST(RandomTypes, AgreeWithReferenceInterpreter) {
  const uint64_t base = 0x1bd7;  // change to explore; failures print the seed
  for (uint64_t s = 0; s < 5000; ++s) {
    checkOne(base + s);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace ibdt::datatype::testing
