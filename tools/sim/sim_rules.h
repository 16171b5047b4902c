// tools/sim/sim_rules.h — what `ibdt-sim --write-rules FILE` writes: the
// simulated times of every variant the automatic choice prices, as rules in
// the tuning file (collectives/alltoall_rules.h, docs/simulator.md "Rules
// for the selection").
#pragma once

#include <string>
#include <vector>

#include "collectives/alltoall_rules.h"
#include "collectives/alltoall_select.h"
#include "tools/sim/sim_run.h"

namespace ibdt::sim {

// One rule per simulated variant kAuto prices (hierarchical: one per
// ranks-per-node count, from the cases on several nodes),
// holding its (p, block, ns) of the cases simulated cleanly (no mismatch,
// a finite time; empty blocks left out: the choice is pairwise there).
std::vector<collectives::AlltoallRule> rulesFromResults(const std::vector<SimCase>& cases,
                                                        const std::vector<SimResult>& results);

// Writes `base` (the tuning file the simulation's on-node costs came from)
// with `rules` in place of any it had, to `path`.
Status writeRules(const std::string& path, const messaging::Tuning& base,
                  const std::vector<collectives::AlltoallRule>& rules, const collectives::AlltoallCostModel& model);

}  // namespace ibdt::sim
