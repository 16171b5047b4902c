// perf/vector_cases.h — the experiment of `ibdt-bench vector` (Wu/Wyckoff/
// Panda Section 6.2), shared by the ibdt benchmark and the MPI_Type_vector
// baseline programs so both run exactly the same sizes, repetition counts and
// data check. No ibdt or MPI types here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ibdt::perf {

// x columns of a 128 x 4096 int array: vector(128, x, 4096, int).
inline constexpr int64_t kVectorRows = 128;
inline constexpr int64_t kVectorColumns = 4096;
// Messages in flight in the bandwidth test (Figure 7), then a 4-byte ack.
inline constexpr int kVectorWindow = 100;

// x = 1, 2, 4 ... 2048; --quick keeps the sizes the issue quotes.
inline std::vector<int64_t> vectorColumnCounts(bool quick) {
  std::vector<int64_t> columns;
  for (int64_t x = 1; x <= 2048; x *= 2) {
    if (!quick || x == 1 || x == 16 || x == 256 || x == 2048) columns.push_back(x);
  }
  return columns;
}

// Ping-pongs per timed repetition: small messages are too short to time alone.
inline int vectorPingPongsPerRep(int64_t x) { return x <= 64 ? 20 : 4; }

inline int64_t vectorBytes(int64_t x) { return kVectorRows * x * 4; }

// The value rank `rank` stores at (row, column) before the checked transfer.
inline int32_t vectorPattern(int rank, int64_t row, int64_t column) {
  return static_cast<int32_t>((rank + 1) * 1000003 + row * kVectorColumns + column);
}

inline void fillVectorPattern(std::vector<int32_t>& array, int rank) {
  array.resize(static_cast<size_t>(kVectorRows * kVectorColumns));
  for (int64_t r = 0; r < kVectorRows; ++r) {
    for (int64_t c = 0; c < kVectorColumns; ++c) array[static_cast<size_t>(r * kVectorColumns + c)] = vectorPattern(rank, r, c);
  }
}

// After `receiver` (filled with fillVectorPattern(receiver)) got the first x
// columns from `sender`: those columns hold the sender's values, every other
// int still holds the receiver's own. Returns "" or what is wrong first.
inline std::string checkVectorColumns(const std::vector<int32_t>& array, int64_t x, int sender, int receiver) {
  for (int64_t r = 0; r < kVectorRows; ++r) {
    for (int64_t c = 0; c < kVectorColumns; ++c) {
      const int32_t want = vectorPattern(c < x ? sender : receiver, r, c);
      const int32_t got = array[static_cast<size_t>(r * kVectorColumns + c)];
      if (got != want) {
        return "x=" + std::to_string(x) + ": int at row " + std::to_string(r) + ", column " + std::to_string(c) +
               " is " + std::to_string(got) + ", expected " + std::to_string(want) +
               (c < x ? " (sent column)" : " (outside the columns: must be untouched)");
      }
    }
  }
  return "";
}

// The same for the contiguous rows: 128 * x ints, all the sender's.
inline void fillContigPattern(std::vector<int32_t>& packed, int64_t x, int rank) {
  packed.resize(static_cast<size_t>(kVectorRows * x));
  for (int64_t i = 0; i < kVectorRows * x; ++i) packed[static_cast<size_t>(i)] = vectorPattern(rank, 0, i);
}

inline std::string checkContig(const std::vector<int32_t>& packed, int64_t x, int sender) {
  for (int64_t i = 0; i < kVectorRows * x; ++i) {
    if (packed[static_cast<size_t>(i)] != vectorPattern(sender, 0, i)) {
      return "x=" + std::to_string(x) + " contiguous: int " + std::to_string(i) + " is " +
             std::to_string(packed[static_cast<size_t>(i)]) + ", expected " + std::to_string(vectorPattern(sender, 0, i));
    }
  }
  return "";
}

}  // namespace ibdt::perf
