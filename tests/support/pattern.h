// tests/support/pattern.h — deterministic test contents, shared by every
// suite: position-and-seed bytes (patternByte/fillPattern) and seeded random
// buffers (pattern), so a receiver can check each byte against what was meant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace ibdt::test {

// Byte `index` of buffer `seed`.
inline uint8_t patternByte(size_t index, uint32_t seed) {
  return static_cast<uint8_t>(index * 131u + seed * 29u + (index >> 9) + 1u);
}

inline void fillPattern(uint8_t* data, size_t length, uint32_t seed) {
  for (size_t i = 0; i < length; ++i) data[i] = patternByte(i, seed);
}

// `bytes` random bytes from generator seed `seed`.
inline std::vector<uint8_t> pattern(size_t bytes, uint32_t seed) {
  std::vector<uint8_t> out(bytes);
  std::mt19937 rng(seed);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

}  // namespace ibdt::test
