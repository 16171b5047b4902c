// datatype/same_set_scatter.h — unpacking small runs whose stride is a
// multiple of 4 KiB (a column of a matrix with a power-of-two row length).
//
// Why: every run then lands in the same L1 set. On the 2-core AMD EPYC VM an
// inlined loop scattering 4-16-byte runs 16 KiB apart ran at 0.55-0.65 /
// 1.2-1.4 / 2.5-2.6 GB/s (4 / 8 / 16 bytes) while the same loop with a store
// fence after each run ran at 0.83-0.88 / 1.7 / 3.5-3.6, and Open MPI's loop
// (a memcpy call per run) at 0.75-0.98 / 1.8-2.0 / 3.7-4.0: many store misses
// in flight to one set seem to evict each other's lines. At 32 bytes the fence
// lost (7.4 against 8.7). Whether it helps depends on the CPU, so the
// process's first such unpacks time both loops (datatype/kernel_trials.h)
// and keep the plain one unless the fenced one is clearly faster.
#pragma once

#include <cstdint>
#include <string_view>

namespace ibdt::datatype {

inline constexpr int64_t kSameSetStride = 4096;
inline constexpr int64_t kSameSetMaxBytes = 16;
inline constexpr int64_t kSameSetMinRuns = 16;

enum class ScatterKernel : uint8_t {
  kPlain,   // the inlined loop of copy_kernels.h
  kFenced,  // the same with a store fence after each run (x86-64 only)
};
std::string_view scatterKernelName(ScatterKernel kernel);
bool scatterKernelAvailable(ScatterKernel kernel);

// True when unpacking `count` runs of `bytes` at `stride` takes this path.
inline bool isSameSetScatter(int64_t count, int64_t bytes, int64_t stride) {
  return bytes <= kSameSetMaxBytes && count >= kSameSetMinRuns && stride >= kSameSetStride &&
         stride % kSameSetStride == 0;
}

// Copies run i from packed + i * bytes to typed + i * stride.
void scatterSameSet(const char* packed, uintptr_t typed, int64_t count, int64_t bytes, int64_t stride);

// The kernel in use, or -1 while the trials run.
int sameSetScatterDecision();
// For tests: force a kernel (>= 0) or start the trials again (-1).
void setSameSetScatterForTesting(int kernel);

}  // namespace ibdt::datatype
