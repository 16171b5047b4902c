// perf/pack_cases.h — the geometry of the `ibdt-bench pack` cases, shared by
// the ibdt benchmark and the MPI_Pack baseline programs so that both measure
// exactly the same layouts. No ibdt or MPI types here.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace ibdt::perf {

struct PackCase {
  enum class Kind { kVector, kColumn, kFace, kStruct, kIndexed };
  std::string name;
  Kind kind;
  int64_t param;        // kVector: block bytes; kColumn: columns; kStruct: x
  int64_t payload = 0;  // bytes of data for kVector/kStruct/kIndexed (0: packPayload())
};

// Strided doubles: `block`-byte blocks, block i at i * 2 * block.
struct VectorGeometry {
  int64_t blocks, elems;  // blocks, doubles per block (stride 2 * elems)
};
inline VectorGeometry vectorGeometry(int64_t blockBytes, int64_t payload) { return {payload / blockBytes, blockBytes / 8}; }

// Wu et al.: `cols` columns of a 128 x 4096 int matrix.
inline constexpr int64_t kColumnRows = 128, kColumnLd = 4096;
// Gropp et al.: a 100 x 100 y-z face of a 200^3 double cube.
inline constexpr int64_t kCubeN = 200, kCubeFace = 100;

// Blocks of ints/doubles at element offsets (struct and indexed cases).
struct BlockList {
  std::vector<int64_t> blens, displs;  // in elements
  int64_t extentElems = 0;             // of one element of the type
  int64_t count = 1;                   // elements packed
};

// Wu et al. Figure 8: int blocks of 1, 2, ..., x, each followed by a one-int gap.
inline BlockList wuStructBlocks(int64_t x, int64_t payload) {
  BlockList b;
  int64_t at = 0, ints = 0;
  for (int64_t i = 1; i <= x; ++i) {
    b.blens.push_back(i);
    b.displs.push_back(at);
    ints += i;
    at += i + 1;
  }
  b.extentElems = at - 1;  // ends after the last block (no trailing gap)
  b.count = std::max<int64_t>(1, payload / (4 * ints));
  return b;
}

// Doubles in blocks of 1..64 with gaps of 1..64 (fixed seed).
inline BlockList randomIndexedBlocks(int64_t payload) {
  BlockList b;
  std::mt19937_64 rng(7);
  int64_t at = 0;
  for (int64_t bytes = 0; bytes < payload;) {
    const int64_t len = 1 + static_cast<int64_t>(rng() % 64);
    b.blens.push_back(len);
    b.displs.push_back(at);
    bytes += len * 8;
    at += len + 1 + static_cast<int64_t>(rng() % 64);
  }
  b.extentElems = at;
  return b;
}

inline int64_t packPayload(bool quick) { return quick ? int64_t{1} << 20 : int64_t{16} << 20; }

inline std::vector<PackCase> packCases(bool quick) {
  using K = PackCase::Kind;
  std::vector<PackCase> cases;
  // 16 MiB cases are bound by memory bandwidth; 1 MiB ones by the kernels (in cache).
  for (int64_t block : {8, 64, 512, 4096}) {
    cases.push_back({"vector " + std::to_string(block) + " B blocks", K::kVector, block, packPayload(quick)});
  }
  if (!quick) {
    for (int64_t block : {8, 64, 512}) {
      cases.push_back({"vector " + std::to_string(block) + " B blocks, 1 MiB", K::kVector, block, int64_t{1} << 20});
    }
  }
  const std::vector<int64_t> cols = quick ? std::vector<int64_t>{1, 64, 2048}
                                          : std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048};
  for (int64_t n : cols) cases.push_back({"wu column " + std::to_string(n) + " cols", K::kColumn, n});
  cases.push_back({"gropp 3-D face 100x100", K::kFace, 0});
  cases.push_back({"wu struct x=32", K::kStruct, 32, packPayload(quick)});
  cases.push_back({"indexed random blocks", K::kIndexed, 0, packPayload(quick)});
  return cases;
}

}  // namespace ibdt::perf
