// The in-place alltoallv's element copies (collectives/inplace_elements.h,
// docs/alltoallv.md "In-place: the cost of a chunk"): random derived types
// from a seed (the datatype tests' generator, checked against its
// independent type-map reference), packed <-> typed through the engine and
// typed -> typed moves that overlap, at element offsets and counts from a
// seed; every packed byte, every moved byte and every hole checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "collectives/inplace_elements.h"
#include "datatype/reference.h"

namespace ibdt::collectives {
namespace {

using datatype::testing::RandomType;
using datatype::testing::TypeGenerator;

constexpr std::byte kFiller{0xEE};

// A buffer of `elements` elements of `type` whose element 0 has its origin
// at origin(); bytes outside the elements' data are filler.
class TypedBuffer {
 public:
  TypedBuffer(const datatype::Datatype& type, int64_t elements)
      : before_(std::max<int64_t>(0, -type.trueLb()) + 64),
        bytes_(before_ + std::max<int64_t>(0, (elements - 1) * type.extent()) + std::max<int64_t>(0, type.trueUb()) + 64,
               kFiller) {}
  std::byte* origin() { return bytes_.data() + before_; }
  std::byte& at(int64_t offset) { return bytes_[static_cast<size_t>(before_ + offset)]; }
  const std::vector<std::byte>& all() const { return bytes_; }

 private:
  int64_t before_;
  std::vector<std::byte> bytes_;
};

std::byte pattern(uint64_t seed, int64_t index) { return std::byte(static_cast<uint8_t>(seed * 131 + index * 7 + 1)); }

class InPlaceElementsRandom : public ::testing::TestWithParam<uint64_t> {};

TEST_P(InPlaceElementsRandom, PackUnpackAndMovesMatchTheReference) {
  const uint64_t seed = GetParam();
  TypeGenerator gen(seed);
  int checked = 0;
  for (int attempt = 0; attempt < 40 && checked < 8; ++attempt) {
    RandomType random = gen.make(static_cast<int>(gen.uniform(1, 3)), 256);
    if (!random.type.commit().isOk() || random.type.size() == 0) continue;
    if (!checkInPlaceLayout(random.type).isOk()) continue;  // refused types are the layout tests' business
    auto elements = InPlaceElements::create(random.type);
    ASSERT_TRUE(elements.isOk()) << random.description << ": " << elements.status().message();
    ++checked;
    const int64_t count = gen.uniform(1, 40), size = random.type.size();
    const std::vector<int64_t> offsets = datatype::testing::refByteOffsets(random.ref, count);
    ASSERT_EQ(static_cast<int64_t>(offsets.size()), count * size) << random.description;
    const std::string where = random.description + ", " + std::to_string(count) + " elements";

    // typed -> packed: the packed bytes in type-map order.
    TypedBuffer typed(random.type, count);
    for (int64_t i = 0; i < count * size; ++i) typed.at(offsets[static_cast<size_t>(i)]) = pattern(seed, i);
    std::vector<std::byte> packed(static_cast<size_t>(count * size) + 16, kFiller);
    elements->copy(typed.origin(), false, packed.data(), true, count);
    for (int64_t i = 0; i < count * size; ++i) {
      ASSERT_EQ(packed[static_cast<size_t>(i)], pattern(seed, i)) << where << ": packed byte " << i;
    }
    for (size_t i = static_cast<size_t>(count * size); i < packed.size(); ++i) ASSERT_EQ(packed[i], kFiller) << where;

    // packed -> typed: every data byte placed, every hole and guard untouched.
    TypedBuffer unpacked(random.type, count);
    elements->copy(packed.data(), true, unpacked.origin(), false, count);
    TypedBuffer expected(random.type, count);
    for (int64_t i = 0; i < count * size; ++i) expected.at(offsets[static_cast<size_t>(i)]) = pattern(seed, i);
    ASSERT_EQ(unpacked.all(), expected.all()) << where << ": unpack";

    // typed -> typed by d elements up and down, overlapping when d < count.
    const int64_t d = gen.uniform(1, count + 1);
    for (bool up : {true, false}) {
      TypedBuffer moving(random.type, count + d);
      const int64_t from = up ? 0 : d, to = up ? d : 0;
      for (int64_t i = 0; i < count * size; ++i) {
        moving.at(from * random.type.extent() + offsets[static_cast<size_t>(i)]) = pattern(seed, i);
      }
      elements->copy(elements->at(moving.origin(), from), false, elements->at(moving.origin(), to), false, count);
      for (int64_t i = 0; i < count * size; ++i) {
        ASSERT_EQ(moving.at(to * random.type.extent() + offsets[static_cast<size_t>(i)]), pattern(seed, i))
            << where << ": moved " << (up ? "up" : "down") << " by " << d << ", byte " << i;
      }
    }
  }
  EXPECT_GT(checked, 0) << "seed " << seed << " produced no type the in-place layout accepts";
}

INSTANTIATE_TEST_SUITE_P(Seeds, InPlaceElementsRandom, ::testing::Range<uint64_t>(1, 41));

}  // namespace
}  // namespace ibdt::collectives
