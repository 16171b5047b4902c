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

struct Layout {
  int64_t bytes, stride, typedAt, packedAt;
};
// Layouts whose speed differs by kernel: blocks at the page start, the same
// 16 bytes past it (glibc malloc's large blocks), blocks whose page offsets
// differ, and rows 16 KiB apart (a column layout).
constexpr Layout kShortLayouts[] = {
    {1024, 2048, 16, 16}, {1024, 4096, 0, 528}, {2048, 4096, 0, 1088}, {2048, 16384, 16, 16}};
constexpr Layout kLongLayouts[] = {{4096, 8192, 0, 0}, {4096, 8192, 16, 16}, {8192, 16384, 16, 16}};

// Fastest kernel on blocks in cache, in one direction, summed over layouts.
// Rounds alternate the kernels so that a burst of load hits all of them.
template <size_t kCount>
BlockKernel calibrateInCache(bool pack, const Layout (&layouts)[kCount]) {
  constexpr int64_t kBlocks = 32, kSpan = kBlocks * 16384 + 8192;
  std::vector<char> storage(static_cast<size_t>(2 * kSpan + 4096), 1);
  char* typedBase = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(storage.data()) + 4095) & ~uintptr_t{4095});
  char* packedBase = typedBase + kSpan;
  double fastest[kBlockKernelCount][kCount];
  for (auto& row : fastest) std::fill(std::begin(row), std::end(row), 1e300);
  for (int round = 0; round < 7; ++round) {
    for (int k = 0; k < kBlockKernelCount; ++k) {
      if (!blockKernelAvailable(static_cast<BlockKernel>(k))) continue;
      for (size_t l = 0; l < kCount; ++l) {
        const Layout& at = layouts[l];
        const double ns = fastestNs(1, [&] {
          copyBlocksWith(static_cast<BlockKernel>(k), pack, packedBase + at.packedAt,
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

// Online trials for the beyond-cache choice: kTrialsPerKernel timed calls per
// kernel and direction, after one untimed copy.
constexpr int kTrialsPerKernel = 3;
constexpr int kTrialCount = kBlockKernelCount * kTrialsPerKernel;

// The beyond-cache trials of one direction.
struct Trials {
  bool warmedUp = false;  // the untimed first copy is done
  int done = 0;
  double bestNsPerByte[kBlockKernelCount] = {1e300, 1e300, 1e300};
};

struct PlanState {
  std::mutex mutex;
  bool made = false;
  BlockCopyPlan plan;
  Status error;
  Trials trials[2];                 // [packing]
  int64_t streamAboveOverride = 0;  // tests
};

PlanState& state() {
  static PlanState s;
  return s;
}

DirectionPlan& direction(BlockCopyPlan& plan, bool pack) { return pack ? plan.pack : plan.unpack; }

// Lock-free copy of the settled plan for the per-call path, per direction
// ([packing]): bits
// 0-3 shortInCache, 4-7 longInCache, 8-11 beyondCache, bit 12 beyondDecided,
// bit 13 valid; 0 = ask under the lock.
std::atomic<uint32_t> settledPlan[2] = {0, 0};
std::atomic<int64_t> settledStreamAbove{0};

void publishLocked(const PlanState& s) {
  settledStreamAbove.store(s.plan.streamAbove, std::memory_order_relaxed);
  for (bool pack : {false, true}) {
    const DirectionPlan& d = s.plan.of(pack);
    const uint32_t word = 0x2000u | (d.beyondDecided ? 0x1000u : 0u) | (static_cast<uint32_t>(d.beyondCache) << 8) |
                          (static_cast<uint32_t>(d.longInCache) << 4) | static_cast<uint32_t>(d.shortInCache);
    settledPlan[pack].store(s.made ? word : 0u, std::memory_order_release);
  }
}

// The kernel from the settled plan, or false when the lock is needed (not yet made, or a trial is due).
bool settledKernel(bool pack, int64_t blockBytes, int64_t total, BlockKernel& kernel) {
  const uint32_t word = settledPlan[pack].load(std::memory_order_acquire);
  if ((word & 0x2000u) == 0) return false;
  if (total < settledStreamAbove.load(std::memory_order_relaxed)) {
    kernel = static_cast<BlockKernel>((word >> (blockBytes < kLongBlockBytes ? 0 : 4)) & 0xFu);
    return true;
  }
  if ((word & 0x1000u) == 0) return false;
  kernel = static_cast<BlockKernel>((word >> 8) & 0xFu);
  return true;
}

Result<int> forcedKernel() {
  return config::getChoice("IBDT_PACK_COPY", {"auto", "memcpy", "vector", "stream"});
}

void forceLocked(PlanState& s, BlockKernel kernel) {
  s.plan.forced = true;
  for (DirectionPlan* d : {&s.plan.pack, &s.plan.unpack}) {
    d->shortInCache = d->longInCache = d->beyondCache = kernel;
    d->beyondDecided = true;
  }
}

void choosePlanLocked(PlanState& s) {
  s.plan = BlockCopyPlan{};
  s.plan.streamAbove = s.streamAboveOverride > 0 ? s.streamAboveOverride : streamThresholdBytes();
  Result<int> forced = forcedKernel();
  if (!forced.isOk()) {
    s.error = forced.status();
    IBDT_LOG(kError, "large-block pack copy: ", forced.status().toString(), "; using memcpy");
    return forceLocked(s, BlockKernel::kMemcpy);
  }
  if (*forced > 0 && blockKernelAvailable(static_cast<BlockKernel>(*forced - 1))) {
    return forceLocked(s, static_cast<BlockKernel>(*forced - 1));
  }
  for (bool pack : {true, false}) {
    DirectionPlan& d = direction(s.plan, pack);
    d.shortInCache = calibrateInCache(pack, kShortLayouts);
    d.longInCache = calibrateInCache(pack, kLongLayouts);
    IBDT_LOG(kDebug, "large-block pack copy in cache, ", pack ? "packing" : "unpacking", ": ",
             blockKernelName(d.shortInCache), " below ", kLongBlockBytes, " bytes, ", blockKernelName(d.longInCache),
             " from there");
  }
}

void makePlanLocked(PlanState& s) {
  if (s.made) return;
  choosePlanLocked(s);
  s.made = true;
  publishLocked(s);
}

// The kernel for a copy beyond the cache in one direction; trial >= 0 when it is timed.
BlockKernel beyondKernel(PlanState& s, bool pack, int64_t blockBytes, int& trial) {
  trial = -1;
  const DirectionPlan& d = s.plan.of(pack);
  if (d.beyondDecided) return d.beyondCache;
  Trials& t = s.trials[pack];
  if (!t.warmedUp) {  // untimed: a fresh buffer's page faults would count against the first kernel
    t.warmedUp = true;
    return s.plan.inCache(pack, blockBytes);
  }
  for (int k = t.done; k < kTrialCount; ++k) {
    const auto kernel = static_cast<BlockKernel>(k % kBlockKernelCount);
    if (blockKernelAvailable(kernel)) {
      trial = k;
      t.done = k + 1;
      return kernel;
    }
  }
  return s.plan.inCache(pack, blockBytes);  // trials handed out, results not all in: in-cache choice meanwhile
}

void recordTrial(PlanState& s, bool pack, BlockKernel kernel, double nsPerByte) {
  Trials& t = s.trials[pack];
  DirectionPlan& d = direction(s.plan, pack);
  const int k = static_cast<int>(kernel);
  if (nsPerByte < t.bestNsPerByte[k]) t.bestNsPerByte[k] = nsPerByte;
  if (t.done < kTrialCount || d.beyondDecided) return;
  int best = 0;
  for (int i = 1; i < kBlockKernelCount; ++i) {
    if (t.bestNsPerByte[i] < t.bestNsPerByte[best] * 0.97) best = i;
  }
  d.beyondCache = static_cast<BlockKernel>(best);
  d.beyondDecided = true;
  publishLocked(s);
  IBDT_LOG(kDebug, "large-block pack copy beyond cache, ", pack ? "packing: " : "unpacking: ",
           blockKernelName(d.beyondCache));
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
  s.plan.forced = s.plan.pack.beyondDecided = s.plan.unpack.beyondDecided = true;
  publishLocked(s);
}

void resetBlockCopyPlanForTesting(int64_t streamAbove) {
  PlanState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.made = false;
  s.streamAboveOverride = streamAbove;
  s.error = Status();
  s.trials[0] = s.trials[1] = Trials{};
  publishLocked(s);
}

void copyLargeBlocks(bool pack, char* packed, uintptr_t typed, int64_t count, int64_t bytes, int64_t stride,
                     const int64_t* displs) {
  BlockKernel kernel = BlockKernel::kMemcpy;
  if (settledKernel(pack, bytes, count * bytes, kernel)) {
    return copyBlocksWith(kernel, pack, packed, typed, count, bytes, stride, displs);
  }
  PlanState& s = state();
  int trial = -1;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    makePlanLocked(s);
    kernel = count * bytes >= s.plan.streamAbove ? beyondKernel(s, pack, bytes, trial) : s.plan.inCache(pack, bytes);
  }
  if (trial < 0) return copyBlocksWith(kernel, pack, packed, typed, count, bytes, stride, displs);
  const double ns = fastestNs(1, [&] { copyBlocksWith(kernel, pack, packed, typed, count, bytes, stride, displs); });
  std::lock_guard<std::mutex> lock(s.mutex);
  recordTrial(s, pack, kernel, ns / static_cast<double>(count * bytes));
}

}  // namespace ibdt::datatype
