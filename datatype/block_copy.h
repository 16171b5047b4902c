// datatype/block_copy.h — the copy used for large blocks (>= kLargeBlockBytes),
// chosen by measurement on the machine that runs the code.
//
// Why: a memcpy per 4 KiB block is not memory speed everywhere. On the 2-core
// AMD EPYC VM (docs/tuning.md) glibc's memcpy takes `rep movsb` for 4 KiB and
// runs at ~3 GB/s when source and destination share their page offset (two
// page-aligned buffers), while a 16-byte load/store loop runs at ~18 GB/s;
// beyond the last-level cache, non-temporal stores save the read for
// ownership of the destination. Which is fastest depends on the CPU, so it is
// measured, not assumed, on the process's own first copies: for each
// direction (pack, unpack) and regime (in cache with blocks under 4 KiB, in
// cache with blocks from 4 KiB, beyond the cache) the first copies are the
// trials — after one untimed copy (it takes the first-touch page faults of a
// fresh buffer, and the cold misses) they rotate through the kernels, timed,
// and the fastest per byte is kept. A synthetic calibration on buffers of its
// own (the earlier design) flipped between memcpy and vector from one process
// to the next on the loaded EPYC VM and then lost 2 KiB column rows to Open
// MPI by 1.5-2x; the user's own copies are the layout that matters.
// IBDT_PACK_COPY forces one kernel for all (memcpy restores the old code).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ibdt/status.h"

namespace ibdt::datatype {

inline constexpr int64_t kLargeBlockBytes = 1024;
// Beyond the cache, blocks from 256 bytes on take the kernels too: there
// what counts is how the destination's lines reach memory, not the per-block
// call, and on the loaded EPYC VM non-temporal stores unpacked 16 MiB of
// 4 KiB blocks at 7-8.4 GB/s against 2-2.4 for cached stores (memcpy and the
// MPI libraries alike), 512 B blocks at 1.9-6.9 against 1.1-2.0. Shorter
// blocks keep their loops: 64 B blocks 128 B apart (mostly partial lines)
// unpacked at 1.0-1.5 with non-temporal stores against 2.0 cached.
inline constexpr int64_t kBeyondCacheMinBlockBytes = 256;
// In cache, blocks below a page and from a page on choose separately: glibc's
// memcpy is a 32-byte vector loop below 4 KiB and `rep movsb` from there on
// this VM, and which wins against the other kernels differs between the two.
inline constexpr int64_t kLongBlockBytes = 4096;

// Beyond the cache, a call of at least kTrialChunks blocks runs the kernels'
// trials on its own chunks (1/kTrialChunks of its blocks each, one kernel per
// chunk), so the first such call decides; smaller calls are trials whole.
inline constexpr int64_t kTrialChunks = 32;

enum class BlockKernel : uint8_t {
  kMemcpy,  // the C library's memcpy per block
  kVector,  // 64 bytes per iteration through 16-byte registers (x86-64 only)
  kStream,  // the same with non-temporal stores, fenced after the call (x86-64 only)
};
inline constexpr int kBlockKernelCount = 3;
std::string_view blockKernelName(BlockKernel kernel);
// True when the kernel exists on this build's CPU architecture.
bool blockKernelAvailable(BlockKernel kernel);

enum class CopyRegime : uint8_t {
  kShortInCache,  // kLargeBlockBytes <= block < kLongBlockBytes, the call moves < ownCacheAbove bytes
  kLongInCache,   // block >= kLongBlockBytes, the call moves < ownCacheAbove bytes
  kBeyondCache,   // block >= kLargeBlockBytes, the call moves >= streamAbove bytes
  kSmallBeyondCache,  // kBeyondCacheMinBlockBytes <= block < kLargeBlockBytes, the call moves >= streamAbove
  kBeyondOwnCache,    // block >= kLargeBlockBytes, ownCacheAbove <= the call's bytes < streamAbove
};
inline constexpr int kCopyRegimeCount = 5;
std::string_view copyRegimeName(CopyRegime regime);

// The regime of a call moving `totalBytes` in blocks of `blockBytes` when
// calls from `streamAbove` bytes on are beyond the cache and calls from
// `ownCacheAbove` on outgrow the core's own (L2) cache. The second cut is
// there because the in-cache trials copy each timed call twice, which only
// a call that fits the core's cache can afford: the EPYC VM reports a
// 508 MiB L3 (sysconf; no /sys cache entries), so 16 MiB calls were "in
// cache", ran 15 whole-call trials (14 copied twice) and packed at 3.6-5.7
// GB/s against 7.8-10.9 for forced memcpy (docs/datatype.md).
inline CopyRegime copyRegimeOf(int64_t blockBytes, int64_t totalBytes, int64_t streamAbove, int64_t ownCacheAbove) {
  if (totalBytes >= streamAbove) {
    return blockBytes < kLargeBlockBytes ? CopyRegime::kSmallBeyondCache : CopyRegime::kBeyondCache;
  }
  if (totalBytes >= ownCacheAbove && blockBytes >= kLargeBlockBytes) return CopyRegime::kBeyondOwnCache;
  return blockBytes < kLongBlockBytes ? CopyRegime::kShortInCache : CopyRegime::kLongInCache;
}

// One direction's choice per regime. Pack writes the contiguous buffer,
// unpack the strided one, so the fastest kernel differs: on the loaded EPYC
// VM non-temporal stores won unpacking 16 MiB of 4 KiB blocks (10.5-11.8 GB/s
// against 7-8.5 for cached stores, fastest runs) and lost packing.
struct DirectionPlan {
  BlockKernel kernel[kCopyRegimeCount] = {BlockKernel::kMemcpy, BlockKernel::kMemcpy, BlockKernel::kMemcpy,
                                          BlockKernel::kMemcpy, BlockKernel::kMemcpy};
  bool decided[kCopyRegimeCount] = {false, false, false, false, false};  // false: still rotating trials
  BlockKernel of(CopyRegime regime) const { return kernel[static_cast<int>(regime)]; }
};

struct BlockCopyPlan {
  DirectionPlan pack, unpack;  // in cache the trials never choose kStream (block_copy.cc says why)
  int64_t streamAbove = int64_t{16} << 20;   // bytes per runs call; half the last-level cache
  int64_t ownCacheAbove = int64_t{1} << 20;  // bytes per runs call; the core's own (L2) cache
  bool forced = false;                       // IBDT_PACK_COPY named a kernel
  const DirectionPlan& of(bool packing) const { return packing ? pack : unpack; }
  CopyRegime regime(int64_t blockBytes, int64_t totalBytes) const {
    return copyRegimeOf(blockBytes, totalBytes, streamAbove, ownCacheAbove);
  }
};

// The process's plan so far (thread-safe; regimes whose trials have not run
// are not decided). A bad IBDT_PACK_COPY is reported here and the plan falls
// back to memcpy.
Result<BlockCopyPlan> blockCopyPlan();
// For tests: replace the plan (forced, every regime decided); reset: trials
// again from the next copy, with streamAbove and ownCacheAbove replaced when > 0.
void setBlockCopyPlanForTesting(const BlockCopyPlan& plan);
void resetBlockCopyPlanForTesting(int64_t streamAbove = 0, int64_t ownCacheAbove = 0);

// Whether `count` runs of `bytes` go to copyLargeBlocks: from
// kLargeBlockBytes always, from kBeyondCacheMinBlockBytes when the call moves
// streamAbove bytes or more (the plan is made on the first ask).
bool takesBlockKernels(int64_t count, int64_t bytes);
// Whether a call moving `totalBytes` outgrows the core's own cache (the
// plan's ownCacheAbove; the plan is made on the first ask).
bool outgrowsOwnCache(int64_t totalBytes);
// Whether it moves at least half the last-level cache (streamAbove).
bool outgrowsSharedCache(int64_t totalBytes);

// Copies `count` blocks of `bytes` (takesBlockKernels) between the packed
// buffer and typed + i*stride (or typed + displs[i]).
void copyLargeBlocks(bool pack, char* packed, uintptr_t typed, int64_t count, int64_t bytes, int64_t stride,
                     const int64_t* displs);

}  // namespace ibdt::datatype
