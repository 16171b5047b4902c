// tools/tune_measure.h — the timings ibdt-tune fits (docs/tuning.md): each
// message path forced between two ranks, ping-pong over a grid of layouts
// (block sizes 64 B .. 8 KiB, messages 64 KiB .. 1 MiB). The paths take
// turns in rounds spread over the run, each path's layouts back to back in
// each round, and are compared per round (transport/messaging/tuning_rounds.h),
// so that a phase of the machine that slows some paths for seconds prices
// them all alike.
#pragma once

#include <array>
#include <vector>

#include "ibdt/fabric.h"
#include "ibdt/messaging.h"
#include "transport/messaging/tuning.h"

namespace ibdt::tune {

struct Measured {
  // samples[path]: empty for a path this provider cannot take.
  std::array<std::vector<messaging::TuningSample>, messaging::kTunedPathCount> samples;
  int64_t minBytes = 0;
  int64_t maxBytes = 0;
  messaging::TuningRounds rounds;
};

struct MeasureOptions {
  // Untimed ping-pongs before a path's timed ones at a layout, in each round:
  // pipelined eager on this VM turns 2-3x slower only after a dozen messages
  // back to back (8 cover it; docs/tuning.md, "Rounds"), and a program that
  // sends one kind of message again and again pays that sustained cost.
  int warmup = 8;
  int reps = 15;    // timed ping-pongs per path and layout, split evenly among the rounds
  int rounds = 5;   // passes over all layouts; a round's median per path is compared within the round
};

// Collective over the two ranks of `bootstrap`; rank 0's result holds the
// timings (rank 1's is empty).
Result<Measured> measurePaths(fabric::Domain& domain, messaging::Bootstrap& bootstrap, const MeasureOptions& options);

}  // namespace ibdt::tune
