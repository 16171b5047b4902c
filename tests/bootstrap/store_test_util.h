// tests/bootstrap/store_test_util.h — helpers shared by the bootstrap tests.
#pragma once

#include <string>
#include <string_view>

#include "ibdt/store.h"

namespace ibdt::test {

inline bootstrap::Bytes toBytes(std::string_view text) { return bootstrap::Bytes(text.begin(), text.end()); }
inline std::string toString(const bootstrap::Bytes& bytes) { return std::string(bytes.begin(), bytes.end()); }

// An endpoint-like blob that depends on both ends and the size, so a value
// delivered to the wrong rank or truncated cannot pass.
inline bootstrap::Bytes patternBlob(int from, int salt, size_t size) {
  bootstrap::Bytes blob(size);
  for (size_t i = 0; i < size; ++i) blob[i] = static_cast<uint8_t>((i * 131 + static_cast<size_t>(from) * 17 + salt) & 0xff);
  return blob;
}

}  // namespace ibdt::test
