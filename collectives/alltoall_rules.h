// collectives/alltoall_rules.h — the selection's rules beyond the ranks a
// machine can run: ibdt-sim's predicted times of each algorithm at rank
// counts it simulated, kept in the tuning file as fits named
// "alltoall-sim/<variant>" whose samples are the predictions
// (docs/simulator.md, "Rules for the selection"). One file format, one
// model: kAuto prices an algorithm by its timings where the file has them,
// else by these predictions, else by the α-β fit (alltoall_select.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ibdt/collectives.h"
#include "ibdt/status.h"
#include "transport/messaging/tuning.h"

namespace ibdt::collectives {

class AlltoallCostModel;

// Predicted times of one variant: kBruckRadix once per radix, kHierarchical
// once per ranks-per-node count (its time depends on the node layout; it is
// priced with the ranks in blocks of ceil(p / nodes)), the others radix 2.
struct AlltoallRule {
  AlltoallAlgorithm algorithm = AlltoallAlgorithm::kPairwise;
  int64_t radix = 2;
  std::vector<messaging::CollectiveSample> predictions;  // [ranks, block bytes, ns]
  int64_t ranksPerNode = 0;  // kHierarchical's; 0 for the others
};

// The rule's predicted time at p ranks and blocks of `blockBytes`: at a
// simulated p, its prediction there (interpolated between block sizes as
// sampledNs does); between two simulated rank counts, interpolated log-log
// in p (a power law) between the nearest rank count below p and the nearest
// above whose predictions cover the block size; none outside the simulated
// rank counts (never extrapolated: the α-β fit prices there). A pure
// function of the rule.
std::optional<double> rulePredictionNs(const AlltoallRule& rule, int p, int64_t blockBytes);

// What a set of rules covers, for ibdt-info: the variants' names, and the
// rank counts and block sizes predicted (sorted, each once).
struct AlltoallRulesCoverage {
  std::vector<std::string> variants;
  std::vector<int64_t> ranks;
  std::vector<int64_t> blockBytes;
  size_t predictions = 0;
  // "3 rules (pairwise, ...), 12 predictions at 64, 256 ranks (interpolated
  // between, the fits beyond) and blocks of 8, 64, 4096 B"; "no rules".
  std::string describe() const;
};
AlltoallRulesCoverage rulesCoverage(const std::vector<AlltoallRule>& rules);

// "alltoall-sim/pairwise", "alltoall-sim/bruck-radix-4",
// "alltoall-sim/hierarchical-16-per-node".
std::string alltoallRuleName(AlltoallAlgorithm algorithm, int64_t radix, int64_t ranksPerNode = 0);
inline constexpr std::string_view kAlltoallRulePrefix = "alltoall-sim/";

// The rules of a parsed tuning file, checked: a rule names an algorithm
// kAuto chooses among (bruck-radix with a radix in [2, 4096), hierarchical
// with its ranks per node in [1, 65536]), and has at least one prediction. A bad entry is an error naming it.
Result<std::vector<AlltoallRule>> alltoallRules(const messaging::Tuning& tuning);

// `base` with its rules replaced by `rules`, each fit carrying `model`'s
// on-node cost of the algorithm (what the simulation used); refused when
// the file could not hold them (kMaxCollectiveFits, kMaxCollectiveSamples)
// or a reader would refuse them.
Result<messaging::Tuning> withAlltoallRules(messaging::Tuning base, const std::vector<AlltoallRule>& rules,
                                            const AlltoallCostModel& model);

}  // namespace ibdt::collectives
