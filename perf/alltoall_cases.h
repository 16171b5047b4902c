// perf/alltoall_cases.h — the experiment of `ibdt-bench alltoall`, shared
// by the ibdt benchmark and the MPI_Alltoall baseline programs so both run
// exactly the same sizes, layouts, repetition counts and data check. No ibdt
// or MPI types here.
//
// Two rows per (ranks, bytes per pair):
//   contig: sendcount = recvcount = bytes of a byte type;
//   vector: each peer's block is vector(bytes / 8, 2, 4, int32) resized to
//           an extent of 2 * bytes (8-byte pieces every 16 bytes), received
//           as bytes / 4 contiguous int32.
#pragma once

#include <cstdint>
#include <new>
#include <string>
#include <vector>

namespace ibdt::perf {

// Benchmark buffers start on a page, as OSU's do, so that the distance
// between a send block and its peer's receive block modulo 4 KiB does not
// depend on what the process allocated before: on AMD EPYC a 64 KiB
// cross-process copy between buffers 16 bytes apart modulo 4 KiB took 3x
// longer, and merely reading a tuning file moved the heap there
// (docs/tuning.md).
template <class T>
struct PageAlignedAllocator {
  using value_type = T;
  static constexpr std::align_val_t kPage{4096};
  PageAlignedAllocator() = default;
  template <class U>
  PageAlignedAllocator(const PageAlignedAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kPage)); }
  void deallocate(T* p, size_t) { ::operator delete(p, kPage); }
  friend bool operator==(const PageAlignedAllocator&, const PageAlignedAllocator&) { return true; }
};
using AlltoallBuffer = std::vector<uint8_t, PageAlignedAllocator<uint8_t>>;

inline constexpr int64_t kAlltoallPiece = 8;    // vector row: data bytes per piece
inline constexpr int64_t kAlltoallGap = 16;     // ... and bytes from one piece to the next

inline std::vector<int64_t> alltoallBytes(bool quick) {
  if (quick) return {8, 4096};
  return {8, 64, 512, 4096, 65536};
}
inline std::vector<int> alltoallRanks() { return {2, 4, 8}; }

// Alltoalls per timed repetition: small ones are too short to time alone.
inline int alltoallCallsPerRep(int64_t bytes) { return bytes <= 512 ? 20 : bytes <= 4096 ? 5 : 2; }

// Träff's repetitions: at least 40 (`reps` from the command line), 300 in
// the microsecond range (blocks up to 512 B); fewer only when asked for
// fewer than 40 (--quick).
inline constexpr int kAlltoallMinReps = 40;
inline constexpr int kAlltoallMicroReps = 300;
inline int alltoallRepsFor(int64_t bytes, int reps) {
  if (reps < kAlltoallMinReps) return reps;
  return bytes <= 512 && reps < kAlltoallMicroReps ? kAlltoallMicroReps : reps;
}

// Bytes per peer block in the send buffer.
inline int64_t alltoallSendExtent(bool vector, int64_t bytes) { return vector ? 2 * bytes : bytes; }
// Where packed byte k of a block sits in it.
inline int64_t alltoallSendOffset(bool vector, int64_t k) {
  return vector ? k / kAlltoallPiece * kAlltoallGap + k % kAlltoallPiece : k;
}

// The value of packed byte k of the block `from` sends to `to`.
inline uint8_t alltoallPattern(int from, int to, int64_t k) {
  return static_cast<uint8_t>((from + 1) * 29 + (to + 1) * 113 + k * 7 + (k >> 8) * 3);
}

// Fills a send buffer of `ranks` blocks (gaps of the vector row are 0xEE).
inline void fillAlltoallSend(AlltoallBuffer& send, bool vector, int64_t bytes, int ranks, int rank) {
  const int64_t extent = alltoallSendExtent(vector, bytes);
  send.assign(static_cast<size_t>(extent * ranks), 0xEE);
  for (int to = 0; to < ranks; ++to) {
    for (int64_t k = 0; k < bytes; ++k) {
      send[static_cast<size_t>(to * extent + alltoallSendOffset(vector, k))] = alltoallPattern(rank, to, k);
    }
  }
}

// "" when recv (ranks * bytes, contiguous) holds every peer's block for
// `rank`, else the first wrong byte.
inline std::string checkAlltoallReceive(const AlltoallBuffer& recv, int64_t bytes, int ranks, int rank) {
  if (static_cast<int64_t>(recv.size()) != bytes * ranks) return "receive buffer of the wrong size";
  for (int from = 0; from < ranks; ++from) {
    for (int64_t k = 0; k < bytes; ++k) {
      const uint8_t got = recv[static_cast<size_t>(from * bytes + k)], want = alltoallPattern(from, rank, k);
      if (got != want) {
        return "rank " + std::to_string(rank) + ", " + std::to_string(bytes) + " B per pair: byte " +
               std::to_string(k) + " from rank " + std::to_string(from) + " is " + std::to_string(got) +
               ", expected " + std::to_string(want);
      }
    }
  }
  return "";
}

}  // namespace ibdt::perf
