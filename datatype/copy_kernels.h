// datatype/copy_kernels.h — gather/scatter loops for many runs of one size.
//
// A memcpy call per 8-byte run reaches ~2 GB/s; with the size known at
// compile time the copy is a register move and the loop runs at memory
// speed. Runs of common small sizes get such a loop; large runs, and runs
// from 256 bytes in calls beyond the cache, the kernel measured fastest on
// this machine (block_copy.h); small runs unpacked at
// 4 KiB-multiple strides the scatter measured fastest (same_set_scatter.h);
// 64-byte runs packed beyond the core's cache the gather measured fastest
// (block64_gather.h); others call memcpy.
#pragma once

#include <cstdint>
#include <cstring>

#include "datatype/block_copy.h"
#include "datatype/block64_gather.h"
#include "datatype/same_set_scatter.h"

namespace ibdt::datatype {

// kPack: typed -> packed (gather); otherwise packed -> typed (scatter).
template <bool kPack, int64_t kBytes>
inline void copyOne(char* packed, uintptr_t typed) {
  char* t = reinterpret_cast<char*>(typed);
  if constexpr (kPack) {
    __builtin_memcpy(packed, t, kBytes);
  } else {
    __builtin_memcpy(t, packed, kBytes);
  }
}

// One run of `bytes` known at run time only: a memcpy call.
template <bool kPack>
inline void copyOne(char* packed, uintptr_t typed, size_t bytes) {
  char* t = reinterpret_cast<char*>(typed);
  if constexpr (kPack) {
    std::memcpy(packed, t, bytes);
  } else {
    std::memcpy(t, packed, bytes);
  }
}

// Runs at typed + i*stride, or at typed + displs[i] when displs is given.
template <bool kPack, int64_t kBytes>
inline void copyFixed(char* packed, uintptr_t typed, int64_t count, int64_t stride, const int64_t* displs) {
  int64_t i = 0;
  if (displs != nullptr) {
    for (; i < count; ++i) copyOne<kPack, kBytes>(packed + i * kBytes, typed + static_cast<uintptr_t>(displs[i]));
    return;
  }
  const uintptr_t step = static_cast<uintptr_t>(stride);
  for (; i + 4 <= count; i += 4) {  // unrolled: the loop is bound by loads/stores, not branches
    const uintptr_t t = typed + static_cast<uintptr_t>(i) * step;
    char* p = packed + i * kBytes;
    copyOne<kPack, kBytes>(p, t);
    copyOne<kPack, kBytes>(p + kBytes, t + step);
    copyOne<kPack, kBytes>(p + 2 * kBytes, t + 2 * step);
    copyOne<kPack, kBytes>(p + 3 * kBytes, t + 3 * step);
  }
  for (; i < count; ++i) copyOne<kPack, kBytes>(packed + i * kBytes, typed + static_cast<uintptr_t>(i) * step);
}

template <bool kPack>
inline void copyRuns(char* packed, uintptr_t typed, int64_t count, int64_t bytes, int64_t stride,
                     const int64_t* displs) {
  if constexpr (kPack) {
    if (displs == nullptr && isBlock64Gather(count, bytes)) return gatherBlocks64(packed, typed, count, stride);
  } else {
    if (displs == nullptr && isSameSetScatter(count, bytes, stride)) {
      return scatterSameSet(packed, typed, count, bytes, stride);
    }
  }
  if (bytes >= kBeyondCacheMinBlockBytes && takesBlockKernels(count, bytes)) {
    return copyLargeBlocks(kPack, packed, typed, count, bytes, stride, displs);
  }
  switch (bytes) {
    case 1: return copyFixed<kPack, 1>(packed, typed, count, stride, displs);
    case 2: return copyFixed<kPack, 2>(packed, typed, count, stride, displs);
    case 4: return copyFixed<kPack, 4>(packed, typed, count, stride, displs);
    case 8: return copyFixed<kPack, 8>(packed, typed, count, stride, displs);
    case 12: return copyFixed<kPack, 12>(packed, typed, count, stride, displs);
    case 16: return copyFixed<kPack, 16>(packed, typed, count, stride, displs);
    case 24: return copyFixed<kPack, 24>(packed, typed, count, stride, displs);
    case 32: return copyFixed<kPack, 32>(packed, typed, count, stride, displs);
    case 64: return copyFixed<kPack, 64>(packed, typed, count, stride, displs);
    default: break;
  }
  // A memcpy call per run; the strided loop apart, so that it tests no
  // displacement pointer per run (a column of 128-byte rows: 128 runs per call).
  const size_t n = static_cast<size_t>(bytes);
  if (displs != nullptr) {
    for (int64_t i = 0; i < count; ++i, packed += n) {
      copyOne<kPack>(packed, typed + static_cast<uintptr_t>(displs[i]), n);
    }
    return;
  }
  for (int64_t i = 0; i < count; ++i, packed += n, typed += static_cast<uintptr_t>(stride)) {
    copyOne<kPack>(packed, typed, n);
  }
}

}  // namespace ibdt::datatype
