// datatype/block64_gather.cc — the 64-byte gather loops and their trials
// (why: datatype/block64_gather.h).
#include "datatype/block64_gather.h"

#include <algorithm>
#include <atomic>
#include <mutex>

#include "base/fastest.h"
#include "base/log.h"
#include "base/vector_copy.h"  // IBDT_HAVE_SSE2_KERNELS
#include "datatype/kernel_trials.h"

namespace ibdt::datatype {

namespace {

constexpr int64_t kB = kGatherBlockBytes;

template <GatherKernel kKernel>
inline void copyBlock(char* packed, uintptr_t typed) {
#if IBDT_HAVE_SSE2_KERNELS
  if constexpr (kKernel == GatherKernel::kStreamed) {
    const auto* from = reinterpret_cast<const __m128i*>(typed);
    auto* to = reinterpret_cast<__m128i*>(packed);
    const __m128i a = _mm_loadu_si128(from), b = _mm_loadu_si128(from + 1);
    const __m128i c = _mm_loadu_si128(from + 2), d = _mm_loadu_si128(from + 3);
    _mm_stream_si128(to, a);
    _mm_stream_si128(to + 1, b);
    _mm_stream_si128(to + 2, c);
    _mm_stream_si128(to + 3, d);
    return;
  }
#endif
  __builtin_memcpy(packed, reinterpret_cast<const char*>(typed), kB);
}

// Four blocks per iteration, as copy_kernels.h's copyFixed; kPrefetched
// also asks for the blocks kPrefetchAheadBlocks ahead (never past the last;
// a block's first and last byte, since an unaligned block spans two lines).
template <GatherKernel kKernel>
void gatherWith(char* packed, uintptr_t typed, int64_t count, int64_t stride) {
  const uintptr_t step = static_cast<uintptr_t>(stride);
  int64_t i = 0;
  auto four = [&](int64_t at) {
    const uintptr_t t = typed + static_cast<uintptr_t>(at) * step;
    char* p = packed + at * kB;
    copyBlock<kKernel>(p, t);
    copyBlock<kKernel>(p + kB, t + step);
    copyBlock<kKernel>(p + 2 * kB, t + 2 * step);
    copyBlock<kKernel>(p + 3 * kB, t + 3 * step);
  };
  if constexpr (kKernel == GatherKernel::kPrefetched) {
    for (; i + 4 + kPrefetchAheadBlocks <= count; i += 4) {
      const uintptr_t ahead = typed + static_cast<uintptr_t>(i + kPrefetchAheadBlocks) * step;
      for (uintptr_t k = 0; k < 4; ++k) {
        __builtin_prefetch(reinterpret_cast<const void*>(ahead + k * step), 0, 3);
        __builtin_prefetch(reinterpret_cast<const void*>(ahead + k * step + kB - 1), 0, 3);
      }
      four(i);
    }
  }
  for (; i + 4 <= count; i += 4) four(i);
  for (; i < count; ++i) copyBlock<kKernel>(packed + i * kB, typed + static_cast<uintptr_t>(i) * step);
#if IBDT_HAVE_SSE2_KERNELS
  if constexpr (kKernel == GatherKernel::kStreamed) _mm_sfence();  // visible before the caller hands the buffer on
#endif
}

void gather(GatherKernel kernel, char* packed, uintptr_t typed, int64_t count, int64_t stride) {
  // Streamed stores need a 16-byte aligned destination: the plain loop otherwise.
  if (kernel == GatherKernel::kStreamed && reinterpret_cast<uintptr_t>(packed) % 16 != 0) kernel = GatherKernel::kPlain;
  switch (kernel) {
    case GatherKernel::kPrefetched: return gatherWith<GatherKernel::kPrefetched>(packed, typed, count, stride);
#if IBDT_HAVE_SSE2_KERNELS
    case GatherKernel::kStreamed: return gatherWith<GatherKernel::kStreamed>(packed, typed, count, stride);
#endif
    default: return gatherWith<GatherKernel::kPlain>(packed, typed, count, stride);
  }
}

// The trials run on the first call's own chunks, as beyond the cache in
// block_copy.cc: kTrialChunks chunks, an untimed one first, then three
// timed chunks per kernel, rotating; nothing is copied twice. A challenger
// replaces the plain loop when its fastest chunk is 5 % faster: all three
// are ibdt's loops (the peers' per-block memcpy is not among them, and
// ran level with the plain loop), so a pick within the noise costs about
// the noise.
constexpr int kTrialsPerKernel = 3;
constexpr double kChallengerWinsBelow = 0.95;
using Trials = KernelTrials<kGatherKernelCount>;
static_assert(kTrialChunks >= 1 + kGatherKernelCount * kTrialsPerKernel, "one call holds every trial");

// Within the shared cache only plain and prefetched compete (why: the header).
int regimeKernels(int beyondCache) {
  return beyondCache && gatherKernelAvailable(GatherKernel::kStreamed) ? kGatherKernelCount : 2;
}

struct GatherState {
  std::mutex mutex;
  Trials trials[2] = {Trials(kTrialsPerKernel, regimeKernels(0), kChallengerWinsBelow),
                      Trials(kTrialsPerKernel, regimeKernels(1), kChallengerWinsBelow)};
};

GatherState& state() {
  static GatherState s;
  return s;
}

// Per regime ([beyondCache]): the kernel, or -1 while the trials run (read without the lock).
constinit std::atomic<int> decided[2] = {-1, -1};

}  // namespace

std::string_view gatherKernelName(GatherKernel kernel) {
  switch (kernel) {
    case GatherKernel::kPlain: return "plain";
    case GatherKernel::kPrefetched: return "prefetched";
    case GatherKernel::kStreamed: return "streamed";
  }
  return "?";
}

bool gatherKernelAvailable(GatherKernel kernel) {
#if IBDT_HAVE_SSE2_KERNELS
  (void)kernel;
  return true;
#else
  return kernel != GatherKernel::kStreamed;
#endif
}

void gatherBlocks64(char* packed, uintptr_t typed, int64_t count, int64_t stride) {
  const int regime = outgrowsSharedCache(count * kB) ? 1 : 0;
  const int settled = decided[regime].load(std::memory_order_acquire);
  if (settled >= 0 || count < kTrialChunks) {
    return gather(static_cast<GatherKernel>(std::max(settled, 0)), packed, typed, count, stride);
  }
  GatherState& s = state();
  const int64_t chunk = (count + kTrialChunks - 1) / kTrialChunks;
  for (int64_t first = 0; first < count; first += chunk) {
    const int64_t n = std::min(chunk, count - first);
    char* p = packed + first * kB;
    const uintptr_t t = typed + static_cast<uintptr_t>(first * stride);
    bool timed = false;
    int kernel = decided[regime].load(std::memory_order_acquire);
    if (kernel < 0) {
      std::lock_guard<std::mutex> lock(s.mutex);
      kernel = s.trials[regime].next(timed);
    }
    const double ns = fastestNs(1, [&] { gather(static_cast<GatherKernel>(kernel), p, t, n, stride); });
    if (!timed) continue;
    std::lock_guard<std::mutex> lock(s.mutex);
    const int winner = s.trials[regime].record(kernel, ns / static_cast<double>(n * kB));
    if (winner < 0 || decided[regime].load(std::memory_order_relaxed) >= 0) continue;
    decided[regime].store(winner, std::memory_order_release);
    IBDT_LOG(kDebug, "64-byte blocks packed beyond the core's cache, ", regime ? "beyond" : "within",
             " the shared one: ", gatherKernelName(static_cast<GatherKernel>(winner)));
  }
}

int block64GatherDecision(bool beyondCache) { return decided[beyondCache ? 1 : 0].load(std::memory_order_acquire); }

void setBlock64GatherForTesting(int kernel) {
  GatherState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  for (int regime = 0; regime < 2; ++regime) {
    s.trials[regime] = Trials(kTrialsPerKernel, regimeKernels(regime), kChallengerWinsBelow);
    decided[regime].store(kernel, std::memory_order_release);
  }
}

}  // namespace ibdt::datatype
