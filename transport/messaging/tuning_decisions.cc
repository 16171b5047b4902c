// transport/messaging/tuning_decisions.cc — limits from the fitted cost model
// (why: tuning_decisions.h).
#include "transport/messaging/tuning_decisions.h"

#include <algorithm>
#include <cmath>

namespace ibdt::messaging {

namespace {
constexpr double kExchangeCopiesPerByte = 2;
}  // namespace

int64_t tunedExchangeZeroCopyMin(const Tuning& tuning, int64_t eagerLimit, int64_t fallback) {
  const PathCost& single = tuning.cost(TunedPath::kContig);
  if (!single.measured || !tuning.cost(TunedPath::kPipelinedContig).measured) return fallback;
  // The file timed one message with both cores free, so the pipelined
  // path's two copies (sender's, receiver's) overlapped. In an exchange every
  // core sends and receives: the two copies of a byte take the same core, so
  // its per-byte cost doubles; the single-copy path copies once either way.
  PathCost pipelined = tuning.cost(TunedPath::kPipelinedContig);
  pipelined.perByteNs *= kExchangeCopiesPerByte;
  const int64_t lo = std::max<int64_t>(eagerLimit, 1);
  const int64_t hi = std::max(lo, tuning.maxBytes);
  auto singleWins = [&](int64_t bytes) {
    return single.ns(static_cast<double>(bytes), 0) <= pipelined.ns(static_cast<double>(bytes), 0);
  };
  if (singleWins(lo)) return lo;
  if (!singleWins(hi)) return 0;  // pipelined eager is cheaper over the whole measured range
  // Two lines cross once: the crossover, rounded up to a whole byte.
  const double crossing = (single.perMessageNs - pipelined.perMessageNs) / (pipelined.perByteNs - single.perByteNs);
  return std::clamp<int64_t>(static_cast<int64_t>(std::ceil(crossing)), lo, hi);
}

int64_t tunedThrottle(const Tuning& tuning, int64_t bytes, int64_t eagerLimit, int64_t fallback) {
  const PathCost& cost = tuning.cost(bytes <= eagerLimit ? TunedPath::kPipelinedContig : TunedPath::kContig);
  if (!cost.measured) return fallback;
  const double byteNs = cost.perByteNs * static_cast<double>(std::max<int64_t>(bytes, 1));
  if (byteNs <= 0) return 64;  // all fixed cost: as many in flight as allowed
  const double inFlight = 1 + std::ceil(cost.perMessageNs / byteNs);
  return static_cast<int64_t>(std::clamp(inFlight, 2.0, 64.0));
}

}  // namespace ibdt::messaging
