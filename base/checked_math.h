// base/checked_math.h — 64-bit arithmetic that records overflow instead
// of wrapping. Accumulate a computation, then test `overflow` once.
#pragma once

#include <algorithm>
#include <cstdint>

namespace ibdt {

struct Checked {
  bool overflow = false;

  int64_t add(int64_t a, int64_t b) {
    int64_t r = 0;
    overflow |= __builtin_add_overflow(a, b, &r);
    return r;
  }
  int64_t sub(int64_t a, int64_t b) {
    int64_t r = 0;
    overflow |= __builtin_sub_overflow(a, b, &r);
    return r;
  }
  int64_t mul(int64_t a, int64_t b) {
    int64_t r = 0;
    overflow |= __builtin_mul_overflow(a, b, &r);
    return r;
  }
};

}  // namespace ibdt
