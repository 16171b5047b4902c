// datatype/block64_gather.h — packing 64-byte blocks in calls that outgrow
// the core's own cache.
//
// Why: 16 MiB of 64-byte blocks 128 bytes apart is bound by memory, and
// there the fixed-size loop of copy_kernels.h ran level with MPICH's
// MPI_Pack (a memcpy per block), and below it in loaded runs (docs/mpi.md).
// On the 2-core AMD EPYC VM, with buffers 16 bytes past a page as malloc
// gives them (every block then spans two lines), a stand-alone loop with
// non-temporal stores packed at 12.2 / 11.4 GB/s (median of 61, two runs;
// fastest 14.9 / 13.4) against 9.1 / 4.9 for the plain loop (fastest 11.5 /
// 11.2) and 9.9 / 9.5 for memcpy per block: the destination is written
// without being read for ownership first. With page-aligned buffers the
// same loop did no better than the plain one, and a loop prefetching 16
// blocks ahead won only there (12.3-13.5 against 11.0-11.5). Which wins
// depends on the CPU, the stride and the alignment, so the process's first
// such call decides by trials on its own chunks (datatype/kernel_trials.h),
// per regime as block_copy.h's kernels: within the shared cache plain and
// prefetched compete (non-temporal stores would push an output that could
// stay cached out to memory), beyond it all three.
#pragma once

#include <cstdint>
#include <string_view>

#include "datatype/block_copy.h"

namespace ibdt::datatype {

inline constexpr int64_t kGatherBlockBytes = 64;
// Blocks prefetched ahead of the one copied: 2 KiB at a 128-byte stride.
inline constexpr int64_t kPrefetchAheadBlocks = 16;

enum class GatherKernel : uint8_t {
  kPlain,       // the unrolled loop of copy_kernels.h
  kPrefetched,  // the same, prefetching kPrefetchAheadBlocks blocks ahead
  kStreamed,    // non-temporal 16-byte stores, fenced after the call (x86-64; packed buffer 16-byte aligned)
};
inline constexpr int kGatherKernelCount = 3;
std::string_view gatherKernelName(GatherKernel kernel);
bool gatherKernelAvailable(GatherKernel kernel);

// True when packing `count` strided runs of `bytes` takes this path: 64-byte
// blocks, in a call moving at least the core's own cache (block_copy.h's
// ownCacheAbove).
inline bool isBlock64Gather(int64_t count, int64_t bytes) {
  return bytes == kGatherBlockBytes && outgrowsOwnCache(count * bytes);
}

// Copies block i from typed + i * stride to packed + i * 64.
void gatherBlocks64(char* packed, uintptr_t typed, int64_t count, int64_t stride);

// The kernel in use for calls beyond the shared cache (`beyondCache`) or
// within it, or -1 while its trials run.
int block64GatherDecision(bool beyondCache);
// For tests: force a kernel (>= 0) or start the trials again (-1), both regimes.
void setBlock64GatherForTesting(int kernel);

}  // namespace ibdt::datatype
