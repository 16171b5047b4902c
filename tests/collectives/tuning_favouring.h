// tests/collectives/tuning_favouring.h — a synthetic tuning file for the
// selection tests: fits in which only one algorithm is cheap per message.
#pragma once

#include "collectives/alltoall_select.h"
#include "support/thread_ranks.h"
#include "transport/messaging/tuning.h"

namespace ibdt::collectives::testing {

// A model in which only `cheap` costs little per message (measured at 2..4
// ranks, 8 B .. 16 KiB blocks; no samples).
inline messaging::Tuning tuningFavouring(AlltoallAlgorithm cheap) {
  messaging::Tuning tuning;
  tuning.key = messaging::currentHostKey(messaging::testing::loopbackCaps().provider);
  tuning.collectiveMinRanks = 2;
  tuning.collectiveMaxRanks = 4;
  tuning.collectiveMinBlock = 8;
  tuning.collectiveMaxBlock = 16384;
  for (AlltoallAlgorithm algorithm : kModelledAlltoalls) {
    messaging::CollectiveCost cost{1000, algorithm == cheap ? 10.0 : 100000.0, 0.5};
    tuning.collectives.push_back({alltoallFitName(algorithm), cost, {}});
  }
  return tuning;
}

}  // namespace ibdt::collectives::testing
