// Combining ibdt-tune's interleaved rounds (tuning_rounds.h).
#include "transport/messaging/tuning_rounds.h"

#include <algorithm>
#include <cmath>

namespace ibdt::messaging {
namespace {

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace

Result<CombinedLayout> combineRounds(const RoundTimings& perRound, double bytes, double blocks) {
  std::vector<int> paths;
  size_t rounds = 0;
  for (int p = 0; p < kTunedPathCount; ++p) {
    const std::vector<double>& times = perRound[static_cast<size_t>(p)];
    if (times.empty()) continue;
    if (rounds != 0 && times.size() != rounds) {
      return makeError(Code::kInvalidArgument, "rounds: ", tunedPathName(static_cast<TunedPath>(p)), " has ",
                       times.size(), " rounds, another path ", rounds);
    }
    for (double ns : times) {
      if (!(std::isfinite(ns) && ns > 0)) {
        return makeError(Code::kInvalidArgument, "rounds: ", tunedPathName(static_cast<TunedPath>(p)), " timed ", ns,
                         " ns");
      }
    }
    rounds = times.size();
    paths.push_back(p);
  }
  CombinedLayout combined;
  if (paths.empty()) return combined;
  // Each round's yardstick: the median path's time in that round.
  std::vector<double> yardstick(rounds);
  for (size_t r = 0; r < rounds; ++r) {
    std::vector<double> times;
    for (int p : paths) times.push_back(perRound[static_cast<size_t>(p)][r]);
    yardstick[r] = median(std::move(times));
  }
  const double scale = median(yardstick);
  int fastest = paths.front();
  for (int p : paths) {
    std::vector<double> ratios(rounds);
    for (size_t r = 0; r < rounds; ++r) ratios[r] = perRound[static_cast<size_t>(p)][r] / yardstick[r];
    combined.ns[static_cast<size_t>(p)] = median(std::move(ratios)) * scale;
    if (*combined.ns[static_cast<size_t>(p)] < *combined.ns[static_cast<size_t>(fastest)]) fastest = p;
  }
  // The round that contradicts the overall fastest path most, if by more than the margin.
  for (size_t r = 0; r < rounds; ++r) {
    const double chosen = perRound[static_cast<size_t>(fastest)][r];
    int winner = fastest;
    for (int p : paths) {
      if (perRound[static_cast<size_t>(p)][r] < perRound[static_cast<size_t>(winner)][r]) winner = p;
    }
    const double ratio = perRound[static_cast<size_t>(winner)][r] / chosen;
    if (ratio >= 1 - kRoundDisagreementMargin) continue;
    if (!combined.disagreement || ratio < combined.disagreement->ratio) {
      combined.disagreement = RoundDisagreement{bytes, blocks, static_cast<TunedPath>(fastest),
                                                static_cast<TunedPath>(winner), ratio};
    }
  }
  return combined;
}

}  // namespace ibdt::messaging
