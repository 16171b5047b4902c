// transport/messaging/tuning_rounds.h — how ibdt-tune combines its rounds
// (docs/tuning.md, "Rounds"). On a shared or virtualised machine the paths
// that hand a message over in pieces turn 3-4x slower for seconds at a time.
// ibdt-tune therefore times the candidate paths taking turns in several
// rounds spread over the run (each path's layouts back to back, warmed up, as
// a program sends), and compares the paths within each round: a path's price
// is the median over rounds of its time over that round's median path time
// (a ratio, which a phase that slows every path alike does not change),
// scaled by the median round's absolute time. Where some round's fastest
// path beat the overall fastest by more than kRoundDisagreementMargin in
// that round, the rounds disagree, and the file says so.
#pragma once

#include <array>
#include <optional>
#include <vector>

#include "transport/messaging/tuning.h"

namespace ibdt::messaging {

// A round's own winner must be this much faster than the overall one, in
// that round, for the rounds to count as disagreeing (below it: noise).
inline constexpr double kRoundDisagreementMargin = 0.10;

// One layout's timings: perRound[path][round] in ns (empty: path not timed).
// Every timed path has the same number of rounds.
using RoundTimings = std::array<std::vector<double>, kTunedPathCount>;

struct CombinedLayout {
  std::array<std::optional<double>, kTunedPathCount> ns;  // the price of each timed path
  std::optional<RoundDisagreement> disagreement;           // the worst round, when they disagree
};

// Pure and deterministic (ties go to the path earlier in TunedPath order).
// An error when the paths' round counts differ or a time is not positive.
Result<CombinedLayout> combineRounds(const RoundTimings& perRound, double bytes, double blocks);

}  // namespace ibdt::messaging
