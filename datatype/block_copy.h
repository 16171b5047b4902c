// datatype/block_copy.h — the copy used for large blocks (>= kLargeBlockBytes),
// chosen by measurement on the machine that runs the code.
//
// Why: a memcpy per 4 KiB block is not memory speed everywhere. On the 2-core
// AMD EPYC VM (docs/tuning.md) glibc's memcpy takes `rep movsb` for 4 KiB and
// runs at ~3 GB/s when source and destination share their page offset (two
// page-aligned buffers), while a 16-byte load/store loop runs at ~18 GB/s;
// beyond the last-level cache, non-temporal stores save the read for
// ownership of the destination. Which is fastest depends on the CPU, so it is
// measured, not assumed:
//  * in cache (a runs call moving fewer than `streamAbove` bytes): a ~4 ms
//    calibration at the first large-block copy of the process times each
//    kernel, packing and unpacking, on page-aliased and non-aliased 1-2 KiB
//    blocks and, separately, 4-8 KiB blocks (fastest of 7);
//  * beyond it: the first large copies in each direction themselves are the
//    trials — after one untimed copy (it takes the first-touch page faults of
//    a fresh buffer) they rotate through the kernels, timed, and the fastest
//    per byte is kept for that direction.
// IBDT_PACK_COPY forces one kernel for both (memcpy restores the old code).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ibdt/status.h"

namespace ibdt::datatype {

inline constexpr int64_t kLargeBlockBytes = 1024;
// In cache, blocks below a page and from a page on choose separately: glibc's
// memcpy is a 32-byte vector loop below 4 KiB and `rep movsb` from there on
// this VM, and which wins against the other kernels differs between the two.
inline constexpr int64_t kLongBlockBytes = 4096;

enum class BlockKernel : uint8_t {
  kMemcpy,  // the C library's memcpy per block
  kVector,  // 64 bytes per iteration through 16-byte registers (x86-64 only)
  kStream,  // the same with non-temporal stores, fenced after the call (x86-64 only)
};
inline constexpr int kBlockKernelCount = 3;
std::string_view blockKernelName(BlockKernel kernel);
// True when the kernel exists on this build's CPU architecture.
bool blockKernelAvailable(BlockKernel kernel);

// One direction's choice. Pack writes the contiguous buffer, unpack the
// strided one, so the fastest kernel differs: on the loaded EPYC VM
// non-temporal stores won unpacking 16 MiB of 4 KiB blocks (10.5-11.8 GB/s
// against 7-8.5 for cached stores, fastest runs) and lost packing.
struct DirectionPlan {
  BlockKernel shortInCache = BlockKernel::kMemcpy;  // kLargeBlockBytes <= block < kLongBlockBytes
  BlockKernel longInCache = BlockKernel::kMemcpy;   // block >= kLongBlockBytes
  BlockKernel beyondCache = BlockKernel::kMemcpy;  // meaningful once beyondDecided
  bool beyondDecided = false;                      // false: still rotating trials
};

struct BlockCopyPlan {
  DirectionPlan pack, unpack;
  int64_t streamAbove = int64_t{16} << 20;  // bytes per runs call; half the last-level cache
  bool forced = false;                      // IBDT_PACK_COPY named a kernel
  const DirectionPlan& of(bool packing) const { return packing ? pack : unpack; }
  BlockKernel inCache(bool packing, int64_t blockBytes) const {
    return blockBytes < kLongBlockBytes ? of(packing).shortInCache : of(packing).longInCache;
  }
};

// The process's plan, calibrated at the first call (thread-safe). A bad
// IBDT_PACK_COPY is reported here and the plan falls back to memcpy.
Result<BlockCopyPlan> blockCopyPlan();
// For tests: replace the plan (forced = true, beyondDecided = true both ways); reset:
// calibrate again at the next copy, with streamAbove replaced when > 0.
void setBlockCopyPlanForTesting(const BlockCopyPlan& plan);
void resetBlockCopyPlanForTesting(int64_t streamAbove = 0);

// Copies `count` blocks of `bytes` (>= kLargeBlockBytes) between the packed
// buffer and typed + i*stride (or typed + displs[i]).
void copyLargeBlocks(bool pack, char* packed, uintptr_t typed, int64_t count, int64_t bytes, int64_t stride,
                     const int64_t* displs);

}  // namespace ibdt::datatype
