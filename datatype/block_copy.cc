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
#include <utility>
#include <vector>

#include "base/config.h"
#include "base/copy_bytes.h"
#include "base/fastest.h"
#include "base/log.h"
#include "base/vector_copy.h"
#include "datatype/kernel_trials.h"

namespace ibdt::datatype {

namespace {

void copyOneBlock(BlockKernel kernel, char* dst, const char* src, size_t n) {
#if IBDT_HAVE_SSE2_KERNELS
  if (kernel == BlockKernel::kVector) return copySse2<false>(dst, src, n);
  if (kernel == BlockKernel::kStream) return copySse2<true>(dst, src, n);
#endif
  (void)kernel;
  copyBytes(dst, src, n);  // memcpy, but not at its measured slow distances
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

// Blocks first .. first+count-1 of a call.
void copyBlockRange(BlockKernel kernel, bool pack, char* packed, uintptr_t typed, int64_t first, int64_t count,
                    int64_t bytes, int64_t stride, const int64_t* displs) {
  copyBlocksWith(kernel, pack, packed + first * bytes, displs ? typed : typed + static_cast<uintptr_t>(first * stride),
                 count, bytes, stride, displs ? displs + first : nullptr);
}

// The size of the cache at `level` (2, 3) from /sys, else sysconf, else 0.
int64_t cacheBytes(int level) {
  for (int index = 4; index >= 1; --index) {
    char path[80];
    std::snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", index);
    std::unique_ptr<FILE, int (*)(FILE*)> levelFile(std::fopen(path, "r"), &std::fclose);
    int found = 0;
    if (!levelFile || std::fscanf(levelFile.get(), "%d", &found) != 1 || found != level) continue;
    std::snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
    std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path, "r"), &std::fclose);
    long kib = 0;
    if (f && std::fscanf(f.get(), "%ldK", &kib) == 1 && kib > 0) return int64_t{kib} * 1024;
  }
  const long bytes = sysconf(level == 2 ? _SC_LEVEL2_CACHE_SIZE : _SC_LEVEL3_CACHE_SIZE);
  return bytes > 0 ? bytes : 0;
}

// Half the last-level cache: a copy moving more leaves little of its destination in cache anyway.
int64_t streamThresholdBytes() {
  const int64_t llc = cacheBytes(3) > 0 ? cacheBytes(3) : cacheBytes(2);
  return llc > 0 ? llc / 2 : int64_t{16} << 20;
}

// The core's own cache (L2): a call moving more cannot afford the in-cache
// trials' second copy (block_copy.h). Unknown: 256 KiB, so that large calls
// take the chunked trials, which copy nothing twice.
int64_t ownCacheThresholdBytes() {
  const int64_t l2 = cacheBytes(2);
  return l2 > 0 ? l2 : int64_t{256} << 10;
}

// Trials per kernel, per direction and regime (kernel_trials.h). In cache a
// copy takes microseconds, so more trials cost little and outvote a
// preempted one; beyond it a copy takes milliseconds. Another kernel
// replaces memcpy only when 15 % faster: Open MPI and MPICH copy each block
// with memcpy, so memcpy is never behind them, and on the loaded EPYC VM
// single trials of kernels within 10-20 % of each other picked a different
// winner run to run (stream for 4 KiB rows in cache, then 20 against Open
// MPI's 25 GB/s in the same run).
// In cache only memcpy and vector compete: an in-cache pack's output is read
// next (sent, copied to a peer), and non-temporal stores would push it out to
// memory, a cost the trial does not see; the issue asks for them beyond the
// cache only. On the loaded EPYC VM trials picked `stream` for 8 KiB rows in
// cache and that process packed 2048 columns at 18.5 GB/s against Open MPI's
// 22 (memcpy: 22.5 against 20.5 in the next run).
// Beyond the cache a call is cut into kTrialChunks chunks and the trials run
// on the chunks of the call itself, one kernel per chunk (rotating), timed
// once each: all kernels meet the same load within milliseconds, and the
// trials copy nothing twice. Each timed chunk follows an untimed memcpy
// chunk: a chunk pays for writing back the dirty lines its predecessor left,
// which a streamed chunk does not leave, so in plain rotation memcpy (after
// stream) would be timed on a cleaner cache than the others. Before, each trial was a whole call copied twice
// (ten calls of 16 MiB), and a process packing 16 MiB a few times did little
// but trials.
// Calls beyond the core's own cache but within the shared one run the
// chunked trials between the in-cache kernels (memcpy, vector): their
// output can still be read from the shared cache.
constexpr int kTrialsInCache = 7, kTrialsBeyondCache = 3;
constexpr int kInCacheKernels = 2;
static_assert(kTrialChunks >= 1 + 2 * kTrialsBeyondCache * kBlockKernelCount, "one call holds every beyond-cache trial");
using Trials = KernelTrials<kBlockKernelCount>;
static_assert(static_cast<int>(BlockKernel::kMemcpy) == 0, "memcpy is the incumbent of the trials");
static_assert(static_cast<int>(BlockKernel::kStream) == kInCacheKernels, "stream is left out of the in-cache trials");

struct PlanState {
  std::mutex mutex;
  bool made = false;
  BlockCopyPlan plan;
  Status error;
  Trials trials[2][kCopyRegimeCount];  // [packing][regime]
  int64_t streamAboveOverride = 0;     // tests
  int64_t ownCacheAboveOverride = 0;   // tests
};

PlanState& state() {
  static PlanState s;
  return s;
}

DirectionPlan& direction(BlockCopyPlan& plan, bool pack) { return pack ? plan.pack : plan.unpack; }

bool isBeyondCache(int regime) {
  return regime == static_cast<int>(CopyRegime::kBeyondCache) || regime == static_cast<int>(CopyRegime::kSmallBeyondCache);
}

// Regimes whose calls of kTrialChunks blocks or more run the trials on their own chunks.
bool takesChunkTrials(int regime) {
  return isBeyondCache(regime) || regime == static_cast<int>(CopyRegime::kBeyondOwnCache);
}

// Lock-free copy of the decided kernels for the per-call path, per direction
// ([packing]): regime r in bits 5r..5r+4 (kernel in the low 4, decided in
// bit 4); 0 = not made yet, ask under the lock.
std::atomic<uint32_t> settledPlan[2] = {0, 0};
std::atomic<int64_t> settledStreamAbove{0}, settledOwnCacheAbove{0};
constexpr uint32_t kSettledValid = 1u << 31;
static_assert(5 * kCopyRegimeCount <= 31, "the regimes' fields fit below the valid bit");

void publishLocked(const PlanState& s) {
  settledStreamAbove.store(s.made ? s.plan.streamAbove : 0, std::memory_order_relaxed);  // 0: ask under the lock
  settledOwnCacheAbove.store(s.plan.ownCacheAbove, std::memory_order_relaxed);
  for (int packing = 0; packing < 2; ++packing) {
    const DirectionPlan& d = s.plan.of(packing == 1);
    uint32_t word = kSettledValid;
    for (int r = 0; r < kCopyRegimeCount; ++r) {
      const uint32_t field = static_cast<uint32_t>(d.kernel[r]) | (d.decided[r] ? 0x10u : 0u);
      word |= field << (5 * r);
    }
    settledPlan[packing].store(s.made ? word : 0u, std::memory_order_release);
  }
}

// The decided kernel, or false when the lock is needed (not made, or trials due).
bool settledKernel(bool pack, int64_t blockBytes, int64_t total, BlockKernel& kernel) {
  const uint32_t word = settledPlan[pack].load(std::memory_order_acquire);
  if ((word & kSettledValid) == 0) return false;
  const int regime = static_cast<int>(copyRegimeOf(blockBytes, total, settledStreamAbove.load(std::memory_order_relaxed),
                                                   settledOwnCacheAbove.load(std::memory_order_relaxed)));
  const uint32_t field = (word >> (5 * regime)) & 0x1Fu;
  if ((field & 0x10u) == 0) return false;
  kernel = static_cast<BlockKernel>(field & 0xFu);
  return true;
}

Result<int> forcedKernel() {
  return config::getChoice("IBDT_PACK_COPY", {"auto", "memcpy", "vector", "stream"});
}

void decideAllLocked(PlanState& s, BlockKernel kernel) {
  for (DirectionPlan* d : {&s.plan.pack, &s.plan.unpack}) {
    for (int r = 0; r < kCopyRegimeCount; ++r) {
      d->kernel[r] = kernel;
      d->decided[r] = true;
    }
  }
}

void forceLocked(PlanState& s, BlockKernel kernel) {
  s.plan.forced = true;
  decideAllLocked(s, kernel);
}

void makePlanLocked(PlanState& s) {
  if (s.made) return;
  s.made = true;
  s.plan = BlockCopyPlan{};
  s.plan.streamAbove = s.streamAboveOverride > 0 ? s.streamAboveOverride : streamThresholdBytes();
  s.plan.ownCacheAbove = s.ownCacheAboveOverride > 0 ? s.ownCacheAboveOverride : ownCacheThresholdBytes();
  for (auto& perDirection : s.trials) {
    for (int r = 0; r < kCopyRegimeCount; ++r) {
      const int perKernel = takesChunkTrials(r) ? kTrialsBeyondCache : kTrialsInCache;
      perDirection[r] = Trials(perKernel, isBeyondCache(r) ? kBlockKernelCount : kInCacheKernels);
    }
  }
  Result<int> forced = forcedKernel();
  if (!forced.isOk()) {
    s.error = forced.status();
    IBDT_LOG(kError, "large-block pack copy: ", forced.status().toString(), "; using memcpy");
    forceLocked(s, BlockKernel::kMemcpy);
  } else if (*forced > 0 && blockKernelAvailable(static_cast<BlockKernel>(*forced - 1))) {
    forceLocked(s, static_cast<BlockKernel>(*forced - 1));
  } else if (!blockKernelAvailable(BlockKernel::kVector)) {
    decideAllLocked(s, BlockKernel::kMemcpy);  // one kernel on this architecture: nothing to measure
  }
  publishLocked(s);
}

void recordTrial(PlanState& s, bool pack, int regime, BlockKernel kernel, double nsPerByte) {
  DirectionPlan& d = direction(s.plan, pack);
  const int winner = s.trials[pack][regime].record(static_cast<int>(kernel), nsPerByte);
  if (winner < 0 || d.decided[regime]) return;
  d.kernel[regime] = static_cast<BlockKernel>(winner);
  d.decided[regime] = true;
  publishLocked(s);
  IBDT_LOG(kDebug, "large-block pack copy, ", pack ? "packing" : "unpacking", " ",
           copyRegimeName(static_cast<CopyRegime>(regime)), ": ", blockKernelName(d.kernel[regime]));
}

// Beyond-cache trials on the chunks of this call (why: above); copies every block.
void copyWithChunkTrials(PlanState& s, bool pack, int regime, char* packed, uintptr_t typed, int64_t count,
                         int64_t bytes, int64_t stride, const int64_t* displs) {
  const int64_t chunk = (count + kTrialChunks - 1) / kTrialChunks;
  bool spacerNext = false;
  for (int64_t first = 0; first < count; first += chunk) {
    if (std::exchange(spacerNext, false)) {
      copyBlockRange(BlockKernel::kMemcpy, pack, packed, typed, first, std::min(chunk, count - first), bytes, stride,
                     displs);
      continue;
    }
    BlockKernel kernel = BlockKernel::kMemcpy;
    bool timed = false, decided = false;
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      const DirectionPlan& d = s.plan.of(pack);
      decided = d.decided[regime];
      kernel = decided ? d.kernel[regime] : static_cast<BlockKernel>(s.trials[pack][regime].next(timed));
    }
    if (decided) return copyBlockRange(kernel, pack, packed, typed, first, count - first, bytes, stride, displs);
    const int64_t n = std::min(chunk, count - first);
    const double ns = fastestNs(1, [&] { copyBlockRange(kernel, pack, packed, typed, first, n, bytes, stride, displs); });
    if (!timed) continue;
    spacerNext = true;
    std::lock_guard<std::mutex> lock(s.mutex);
    recordTrial(s, pack, regime, kernel, ns / static_cast<double>(n * bytes));
  }
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

std::string_view copyRegimeName(CopyRegime regime) {
  switch (regime) {
    case CopyRegime::kShortInCache: return "in cache, 1-4 KiB blocks";
    case CopyRegime::kLongInCache: return "in cache, blocks from 4 KiB";
    case CopyRegime::kBeyondCache: return "beyond the cache";
    case CopyRegime::kSmallBeyondCache: return "beyond the cache, 256 B-1 KiB blocks";
    case CopyRegime::kBeyondOwnCache: return "beyond the core's cache, within the shared one";
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
  s.plan.forced = true;
  for (DirectionPlan* d : {&s.plan.pack, &s.plan.unpack}) std::fill(std::begin(d->decided), std::end(d->decided), true);
  publishLocked(s);
}

void resetBlockCopyPlanForTesting(int64_t streamAbove, int64_t ownCacheAbove) {
  PlanState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.made = false;
  s.streamAboveOverride = streamAbove;
  s.ownCacheAboveOverride = ownCacheAbove;
  s.error = Status();
  publishLocked(s);
}

namespace {

// The plan's two cuts, made on the first ask (lock-free once made).
void settledCuts(int64_t& streamAbove, int64_t& ownCacheAbove) {
  streamAbove = settledStreamAbove.load(std::memory_order_relaxed);
  ownCacheAbove = settledOwnCacheAbove.load(std::memory_order_relaxed);
  if (streamAbove != 0) return;
  PlanState& s = state();  // no plan yet
  std::lock_guard<std::mutex> lock(s.mutex);
  makePlanLocked(s);
  streamAbove = s.plan.streamAbove;
  ownCacheAbove = s.plan.ownCacheAbove;
}

}  // namespace

bool takesBlockKernels(int64_t count, int64_t bytes) {
  if (bytes >= kLargeBlockBytes) return true;
  if (bytes < kBeyondCacheMinBlockBytes) return false;
  int64_t streamAbove = 0, ownCacheAbove = 0;
  settledCuts(streamAbove, ownCacheAbove);
  return count * bytes >= streamAbove;
}

bool outgrowsOwnCache(int64_t totalBytes) {
  int64_t streamAbove = 0, ownCacheAbove = 0;
  settledCuts(streamAbove, ownCacheAbove);
  return totalBytes >= ownCacheAbove;
}

bool outgrowsSharedCache(int64_t totalBytes) {
  int64_t streamAbove = 0, ownCacheAbove = 0;
  settledCuts(streamAbove, ownCacheAbove);
  return totalBytes >= streamAbove;
}

void copyLargeBlocks(bool pack, char* packed, uintptr_t typed, int64_t count, int64_t bytes, int64_t stride,
                     const int64_t* displs) {
  BlockKernel kernel = BlockKernel::kMemcpy;
  if (settledKernel(pack, bytes, count * bytes, kernel)) {
    return copyBlocksWith(kernel, pack, packed, typed, count, bytes, stride, displs);
  }
  PlanState& s = state();
  bool timed = false, chunkTrials = false;
  int regime = 0;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    makePlanLocked(s);
    regime = static_cast<int>(s.plan.regime(bytes, count * bytes));
    const DirectionPlan& d = s.plan.of(pack);
    chunkTrials = !d.decided[regime] && takesChunkTrials(regime) && count >= kTrialChunks;
    if (!chunkTrials) {
      kernel = d.decided[regime] ? d.kernel[regime] : static_cast<BlockKernel>(s.trials[pack][regime].next(timed));
    }
  }
  if (chunkTrials) return copyWithChunkTrials(s, pack, regime, packed, typed, count, bytes, stride, displs);
  copyBlocksWith(kernel, pack, packed, typed, count, bytes, stride, displs);
  if (!timed) return;
  // An in-cache trial (or one beyond the cache in a call of too few blocks
  // to cut into chunks) times the kernel's second copy of the same bytes
  // (the copy is idempotent), so that it meets the cache as it left it, not
  // as the previous kernel did: timed first copies put memcpy, which the
  // rotation runs right after stream's non-temporal stores had evicted the
  // destination, at a disadvantage it does not have when used alone.
  const double ns = fastestNs(1, [&] { copyBlocksWith(kernel, pack, packed, typed, count, bytes, stride, displs); });
  std::lock_guard<std::mutex> lock(s.mutex);
  recordTrial(s, pack, regime, kernel, ns / static_cast<double>(count * bytes));
}

}  // namespace ibdt::datatype
