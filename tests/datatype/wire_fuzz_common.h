// tests/datatype/wire_fuzz_common.h — what the fuzz target and the CI
// mutation test do with one blob: decode it and, if it decodes, use the
// layout in every way that touches no memory at its addresses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "ibdt/datatype.h"

namespace ibdt::datatype::testing {

// Returns true when the blob decoded.
inline bool exerciseBlob(std::span<const uint8_t> blob) {
  auto type = deserialize(blob);
  if (!type.isOk()) return false;
  for (int64_t count : {int64_t{1}, int64_t{3}}) {
    auto seg = Segment::create(*type, count);
    if (!seg.isOk()) continue;
    Iovec iov[16];
    const int64_t size = seg->size();
    (void)seg->iovecs(uint64_t{1} << 40, 0, size, iov, 16);
    (void)seg->iovecs(0, size / 3, size - size / 3, iov, 16);
    (void)stats(*type, count);
    (void)signature(*type, count);
    (void)checkMatch(*type, count, *type, count + 1);
  }
  auto again = serialize(*type);
  if (again.isOk()) (void)deserialize(*again);
  return true;
}

}  // namespace ibdt::datatype::testing
