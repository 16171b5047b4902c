// perf/vector_targets.h — the targets for `ibdt-bench vector`,
// computed from the measured rows (latency medians, per x):
//   auto <= 0.5 x Open MPI for x <= 256 and <= 1 x Open MPI for every x;
//   auto <= 1.3 x Contig for x >= 256 and <= 2 x Contig for x >= 16;
//   auto <= 1.1 x the best forced scheme (Generic, BC-SPUP, RWG-UP, P-RRS,
//   Multi-W) among those that carried the messages (not eager ones).
// A ratio is left out (and no verdict given on it) when a row was not run.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "perf/report.h"

namespace ibdt::perf {

struct VectorTargets {
  Report table;         // one row per x with an "auto" row: ratios, bounds, verdict
  std::string summary;  // "every target met at k of n sizes judged"
};

VectorTargets vectorTargets(const nlohmann::json& rows);

}  // namespace ibdt::perf
