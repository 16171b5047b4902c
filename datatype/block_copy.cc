// datatype/block_copy.cc — large-block copy kernels and their calibration
// (why: datatype/block_copy.h).
#include "datatype/block_copy.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <iterator>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "base/config.h"
#include "base/fastest.h"
#include "base/log.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#define IBDT_HAVE_SSE2_KERNELS 1
#endif

namespace ibdt::datatype {

namespace {

#if IBDT_HAVE_SSE2_KERNELS
template <bool kStream>
void copySse2(char* dst, const char* src, size_t n) {
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {  // four loads before four stores: the loads' misses overlap
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    if constexpr (kStream) {
      // _mm_stream_si128 needs 16-byte alignment; an unaligned destination takes the cached stores.
      if ((reinterpret_cast<uintptr_t>(dst + i) & 15) == 0) {
        _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
        _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
        _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
        _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
        continue;
      }
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
  if (i < n) std::memcpy(dst + i, src + i, n - i);
}
#endif

void copyOneBlock(BlockKernel kernel, char* dst, const char* src, size_t n) {
#if IBDT_HAVE_SSE2_KERNELS
  if (kernel == BlockKernel::kVector) return copySse2<false>(dst, src, n);
  if (kernel == BlockKernel::kStream) return copySse2<true>(dst, src, n);
#endif
  (void)kernel;
  std::memcpy(dst, src, n);
}

void copyBlocksWith(BlockKernel kernel, bool pack, char* packed, uintptr_t typed, int64_t count, int64_t bytes,
                    int64_t stride, const int64_t* displs) {
  const size_t n = static_cast<size_t>(bytes);
  for (int64_t i = 0; i < count; ++i) {
    char* t = reinterpret_cast<char*>(typed + static_cast<uintptr_t>(displs ? displs[i] : i * stride));
    char* p = packed + i * bytes;
    pack ? copyOneBlock(kernel, p, t, n) : copyOneBlock(kernel, t, p, n);
  }
#if IBDT_HAVE_SSE2_KERNELS
  if (kernel == BlockKernel::kStream) _mm_sfence();  // streamed stores visible before the caller hands the buffer on
#endif
}

// Half the last-level cache: a copy moving more leaves little of its destination in cache anyway.
int64_t streamThresholdBytes() {
  for (int index = 4; index >= 2; --index) {
    char path[80];
    std::snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
    std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path, "r"), &std::fclose);
    long kib = 0;
    if (f && std::fscanf(f.get(), "%ldK", &kib) == 1 && kib > 0) return int64_t{kib} * 1024 / 2;
  }
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return l3 > 0 ? l3 / 2 : int64_t{16} << 20;
}

// Fastest kernel on blocks in cache, over layouts whose speed differs by
// kernel: page-aligned 4 KiB blocks, the same 16 bytes past the page (glibc
// malloc's large blocks) and 2 KiB blocks whose offsets differ. Rounds
// alternate the kernels so that a burst of load hits all of them.
BlockKernel calibrateInCache() {
  struct Layout {
    int64_t bytes, stride, typedAt, packedAt;
  };
  constexpr int64_t kBlocks = 64, kSpan = 2 * kBlocks * 4096 + 4096;
  constexpr Layout kLayouts[] = {{4096, 8192, 0, 0}, {4096, 8192, 16, 16}, {2048, 4096, 0, 1088}};
  std::vector<char> storage(static_cast<size_t>(2 * kSpan + 4096), 1);
  char* typedBase = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(storage.data()) + 4095) & ~uintptr_t{4095});
  char* packedBase = typedBase + kSpan;
  double fastest[kBlockKernelCount][std::size(kLayouts)];
  for (auto& row : fastest) std::fill(std::begin(row), std::end(row), 1e300);
  for (int round = 0; round < 7; ++round) {
    for (int k = 0; k < kBlockKernelCount; ++k) {
      if (!blockKernelAvailable(static_cast<BlockKernel>(k))) continue;
      for (size_t l = 0; l < std::size(kLayouts); ++l) {
        const Layout& at = kLayouts[l];
        const double ns = fastestNs(1, [&] {
          copyBlocksWith(static_cast<BlockKernel>(k), true, packedBase + at.packedAt,
                         reinterpret_cast<uintptr_t>(typedBase + at.typedAt), kBlocks, at.bytes, at.stride, nullptr);
        });
        fastest[k][l] = std::min(fastest[k][l], ns);
      }
    }
  }
  double best = 1e300;
  BlockKernel chosen = BlockKernel::kMemcpy;
  for (int k = 0; k < kBlockKernelCount; ++k) {
    double total = 0;
    for (double ns : fastest[k]) total += ns;
    if (total < best * 0.97) {  // the earlier (simpler) kernel unless clearly faster
      best = total;
      chosen = static_cast<BlockKernel>(k);
    }
  }
  return chosen;
}

// Online trials for the beyond-cache choice: kTrialsPerKernel timed calls per kernel.
constexpr int kTrialsPerKernel = 2;

struct PlanState {
  std::mutex mutex;
  bool made = false;
  BlockCopyPlan plan;
  Status error;
  int trialsDone = 0;
  int64_t streamAboveOverride = 0;  // tests
  double bestNsPerByte[kBlockKernelCount] = {1e300, 1e300, 1e300};
};

PlanState& state() {
  static PlanState s;
  return s;
}

// Lock-free copy of the settled plan for the per-call path: bit 9 valid, bit 8
// beyondDecided, bits 4-7 beyondCache, bits 0-3 inCache; 0 = ask under the lock.
std::atomic<uint32_t> settledPlan{0};
std::atomic<int64_t> settledStreamAbove{0};

void publishLocked(const PlanState& s) {
  settledStreamAbove.store(s.plan.streamAbove, std::memory_order_relaxed);
  const uint32_t word = 0x200u | (s.plan.beyondDecided ? 0x100u : 0u) |
                        (static_cast<uint32_t>(s.plan.beyondCache) << 4) | static_cast<uint32_t>(s.plan.inCache);
  settledPlan.store(s.made ? word : 0u, std::memory_order_release);
}

// The kernel from the settled plan, or false when the lock is needed (not yet made, or a trial is due).
bool settledKernel(int64_t total, BlockKernel& kernel) {
  const uint32_t word = settledPlan.load(std::memory_order_acquire);
  if ((word & 0x200u) == 0) return false;
  if (total < settledStreamAbove.load(std::memory_order_relaxed)) {
    kernel = static_cast<BlockKernel>(word & 0xFu);
    return true;
  }
  if ((word & 0x100u) == 0) return false;
  kernel = static_cast<BlockKernel>((word >> 4) & 0xFu);
  return true;
}

Result<int> forcedKernel() {
  return config::getChoice("IBDT_PACK_COPY", {"auto", "memcpy", "vector", "stream"});
}

void choosePlanLocked(PlanState& s) {
  s.plan = BlockCopyPlan{};
  s.plan.streamAbove = s.streamAboveOverride > 0 ? s.streamAboveOverride : streamThresholdBytes();
  Result<int> forced = forcedKernel();
  if (!forced.isOk()) {
    s.error = forced.status();
    IBDT_LOG(kError, "large-block pack copy: ", forced.status().toString(), "; using memcpy");
    s.plan.forced = true;
    s.plan.beyondDecided = true;
    return;
  }
  if (*forced > 0 && blockKernelAvailable(static_cast<BlockKernel>(*forced - 1))) {
    s.plan.inCache = s.plan.beyondCache = static_cast<BlockKernel>(*forced - 1);
    s.plan.forced = s.plan.beyondDecided = true;
    return;
  }
  s.plan.inCache = calibrateInCache();
  IBDT_LOG(kDebug, "large-block pack copy in cache: ", blockKernelName(s.plan.inCache));
}

void makePlanLocked(PlanState& s) {
  if (s.made) return;
  choosePlanLocked(s);
  s.made = true;
  publishLocked(s);
}

// The kernel for a copy of `total` bytes beyond the cache; trial >= 0 when it is timed.
BlockKernel beyondKernel(PlanState& s, int& trial) {
  trial = -1;
  if (s.plan.beyondDecided) return s.plan.beyondCache;
  for (int k = s.trialsDone; k < kBlockKernelCount * kTrialsPerKernel; ++k) {
    const auto kernel = static_cast<BlockKernel>(k % kBlockKernelCount);
    if (blockKernelAvailable(kernel)) {
      trial = k;
      s.trialsDone = k + 1;
      return kernel;
    }
  }
  return s.plan.beyondCache;
}

void recordTrial(PlanState& s, BlockKernel kernel, double nsPerByte) {
  const int k = static_cast<int>(kernel);
  if (nsPerByte < s.bestNsPerByte[k]) s.bestNsPerByte[k] = nsPerByte;
  if (s.trialsDone < kBlockKernelCount * kTrialsPerKernel || s.plan.beyondDecided) return;
  int best = 0;
  for (int i = 1; i < kBlockKernelCount; ++i) {
    if (s.bestNsPerByte[i] < s.bestNsPerByte[best] * 0.97) best = i;
  }
  s.plan.beyondCache = static_cast<BlockKernel>(best);
  s.plan.beyondDecided = true;
  publishLocked(s);
  IBDT_LOG(kDebug, "large-block pack copy beyond cache: ", blockKernelName(s.plan.beyondCache));
}

}  // namespace

std::string_view blockKernelName(BlockKernel kernel) {
  switch (kernel) {
    case BlockKernel::kMemcpy: return "memcpy";
    case BlockKernel::kVector: return "vector";
    case BlockKernel::kStream: return "stream";
  }
  return "?";
}

bool blockKernelAvailable(BlockKernel kernel) {
#if IBDT_HAVE_SSE2_KERNELS
  (void)kernel;
  return true;
#else
  return kernel == BlockKernel::kMemcpy;
#endif
}

Result<BlockCopyPlan> blockCopyPlan() {
  PlanState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  makePlanLocked(s);
  if (!s.error.isOk()) return s.error;
  return s.plan;
}

void setBlockCopyPlanForTesting(const BlockCopyPlan& plan) {
  PlanState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.made = true;
  s.error = Status();
  s.plan = plan;
  s.plan.forced = s.plan.beyondDecided = true;
  publishLocked(s);
}

void resetBlockCopyPlanForTesting(int64_t streamAbove) {
  PlanState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.made = false;
  s.streamAboveOverride = streamAbove;
  s.error = Status();
  s.trialsDone = 0;
  for (double& ns : s.bestNsPerByte) ns = 1e300;
  publishLocked(s);
}

void copyLargeBlocks(bool pack, char* packed, uintptr_t typed, int64_t count, int64_t bytes, int64_t stride,
                     const int64_t* displs) {
  BlockKernel kernel = BlockKernel::kMemcpy;
  if (settledKernel(count * bytes, kernel)) return copyBlocksWith(kernel, pack, packed, typed, count, bytes, stride, displs);
  PlanState& s = state();
  int trial = -1;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    makePlanLocked(s);
    kernel = count * bytes >= s.plan.streamAbove ? beyondKernel(s, trial) : s.plan.inCache;
  }
  if (trial < 0) return copyBlocksWith(kernel, pack, packed, typed, count, bytes, stride, displs);
  const double ns = fastestNs(1, [&] { copyBlocksWith(kernel, pack, packed, typed, count, bytes, stride, displs); });
  std::lock_guard<std::mutex> lock(s.mutex);
  recordTrial(s, kernel, ns / static_cast<double>(count * bytes));
}

}  // namespace ibdt::datatype
