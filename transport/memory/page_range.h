// transport/memory/page_range.h — page-aligned address ranges.
//
// Registrations pin whole pages, so every index in this module works on
// [begin, end) ranges rounded out to page boundaries.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ibdt::memory {

struct PageRange {
  uintptr_t begin = 0;
  uintptr_t end = 0;  // exclusive

  size_t bytes() const { return end - begin; }
  bool contains(const PageRange& other) const { return begin <= other.begin && other.end <= end; }
  bool overlaps(const PageRange& other) const { return begin < other.end && other.begin < end; }
};

inline uintptr_t alignDown(uintptr_t value, size_t pageSize) { return value & ~(uintptr_t{pageSize} - 1); }
inline uintptr_t alignUp(uintptr_t value, size_t pageSize) {
  return (value + pageSize - 1) & ~(uintptr_t{pageSize} - 1);
}

// True when [address, address + length), rounded out to whole pages, would
// wrap around the end of the address space.
inline bool wrapsAround(const void* address, size_t length, size_t pageSize) {
  auto begin = reinterpret_cast<uintptr_t>(address);
  return length > UINTPTR_MAX - begin || begin + length > UINTPTR_MAX - pageSize;
}

// The pages touched by [address, address + length); a zero length touches the
// page that holds `address`, so a registration of it is still well defined.
inline PageRange pagesOf(const void* address, size_t length, size_t pageSize) {
  auto begin = reinterpret_cast<uintptr_t>(address);
  uintptr_t last = length == 0 ? begin : begin + length - 1;
  return {alignDown(begin, pageSize), alignDown(last, pageSize) + pageSize};
}

}  // namespace ibdt::memory
