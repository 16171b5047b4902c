// datatype/same_set_scatter.cc — the two scatter loops and their trials
// (why: datatype/same_set_scatter.h).
#include "datatype/same_set_scatter.h"

#include <atomic>
#include <cstring>
#include <mutex>

#include "base/fastest.h"
#include "base/log.h"
#include "datatype/kernel_trials.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#define IBDT_HAVE_STORE_FENCE 1
#endif

namespace ibdt::datatype {

namespace {

template <bool kFenced, int64_t kBytes>
void scatterFixed(const char* packed, uintptr_t typed, int64_t count, int64_t stride) {
  for (int64_t i = 0; i < count; ++i) {
    __builtin_memcpy(reinterpret_cast<char*>(typed + static_cast<uintptr_t>(i * stride)), packed + i * kBytes, kBytes);
#if IBDT_HAVE_STORE_FENCE
    if constexpr (kFenced) _mm_sfence();  // lets this run's store miss resolve before the next run's
#endif
  }
}

template <bool kFenced>
void scatterWith(const char* packed, uintptr_t typed, int64_t count, int64_t bytes, int64_t stride) {
  switch (bytes) {
    case 1: return scatterFixed<kFenced, 1>(packed, typed, count, stride);
    case 2: return scatterFixed<kFenced, 2>(packed, typed, count, stride);
    case 4: return scatterFixed<kFenced, 4>(packed, typed, count, stride);
    case 8: return scatterFixed<kFenced, 8>(packed, typed, count, stride);
    case 12: return scatterFixed<kFenced, 12>(packed, typed, count, stride);
    case 16: return scatterFixed<kFenced, 16>(packed, typed, count, stride);
    default: break;
  }
  for (int64_t i = 0; i < count; ++i) {
    std::memcpy(reinterpret_cast<char*>(typed + static_cast<uintptr_t>(i * stride)), packed + i * bytes,
                static_cast<size_t>(bytes));
#if IBDT_HAVE_STORE_FENCE
    if constexpr (kFenced) _mm_sfence();
#endif
  }
}

void scatter(ScatterKernel kernel, const char* packed, uintptr_t typed, int64_t count, int64_t bytes, int64_t stride) {
  if (kernel == ScatterKernel::kFenced) return scatterWith<true>(packed, typed, count, bytes, stride);
  scatterWith<false>(packed, typed, count, bytes, stride);
}

constexpr int kTrialsPerKernel = 7;  // a scatter takes microseconds
using Trials = KernelTrials<2>;

struct ScatterState {
  std::mutex mutex;
  Trials trials{kTrialsPerKernel};
};

ScatterState& state() {
  static ScatterState s;
  return s;
}

// The decided kernel, or -1 while the trials run (read without the lock).
#if IBDT_HAVE_STORE_FENCE
constinit std::atomic<int> decided{-1};
#else
constinit std::atomic<int> decided{0};  // one loop on this architecture: nothing to measure
#endif

}  // namespace

std::string_view scatterKernelName(ScatterKernel kernel) {
  return kernel == ScatterKernel::kFenced ? "fenced" : "plain";
}

bool scatterKernelAvailable(ScatterKernel kernel) {
#if IBDT_HAVE_STORE_FENCE
  (void)kernel;
  return true;
#else
  return kernel == ScatterKernel::kPlain;
#endif
}

void scatterSameSet(const char* packed, uintptr_t typed, int64_t count, int64_t bytes, int64_t stride) {
  const int settled = decided.load(std::memory_order_acquire);
  if (settled >= 0) return scatter(static_cast<ScatterKernel>(settled), packed, typed, count, bytes, stride);
  ScatterState& s = state();
  bool timed = false;
  ScatterKernel kernel = ScatterKernel::kPlain;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    kernel = static_cast<ScatterKernel>(s.trials.next(timed));
  }
  scatter(kernel, packed, typed, count, bytes, stride);
  if (!timed) return;
  // Times a second, identical scatter: the kernel meets the cache as it left it (block_copy.cc).
  const double ns = fastestNs(1, [&] { scatter(kernel, packed, typed, count, bytes, stride); });
  std::lock_guard<std::mutex> lock(s.mutex);
  const int winner = s.trials.record(static_cast<int>(kernel), ns / static_cast<double>(count * bytes));
  if (winner < 0 || decided.load(std::memory_order_relaxed) >= 0) return;
  decided.store(winner, std::memory_order_release);
  IBDT_LOG(kDebug, "small-run unpack at 4 KiB-multiple strides: ", scatterKernelName(static_cast<ScatterKernel>(winner)));
}

int sameSetScatterDecision() { return decided.load(std::memory_order_acquire); }

void setSameSetScatterForTesting(int kernel) {
  ScatterState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.trials = Trials(kTrialsPerKernel);
  if (kernel < 0 && !scatterKernelAvailable(ScatterKernel::kFenced)) kernel = 0;
  decided.store(kernel, std::memory_order_release);
}

}  // namespace ibdt::datatype
