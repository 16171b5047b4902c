// Rules from simulated times (sim_rules.h).
#include "tools/sim/sim_rules.h"

#include <algorithm>
#include <cmath>

namespace ibdt::sim {

using collectives::AlltoallAlgorithm;
using collectives::AlltoallRule;

std::vector<AlltoallRule> rulesFromResults(const std::vector<SimCase>& cases, const std::vector<SimResult>& results) {
  std::vector<AlltoallRule> rules;
  for (size_t c = 0; c < cases.size() && c < results.size(); ++c) {
    const SimCase& simCase = cases[c];
    // The hierarchical alltoall's rule is per ranks-per-node count, and only where it spans several nodes.
    const bool hierarchical = simCase.algorithm == AlltoallAlgorithm::kHierarchical;
    const bool priced = std::find(collectives::kPricedAlltoalls.begin(), collectives::kPricedAlltoalls.end(),
                                  simCase.algorithm) != collectives::kPricedAlltoalls.end() &&
                        (!hierarchical || simCase.shape.ranks > simCase.shape.ranksPerNode);
    const double ns = results[c].seconds * 1e9;
    if (!priced || !results[c].mismatch.empty() || !std::isfinite(ns) || ns <= 0 || simCase.shape.blockBytes <= 0) {
      continue;
    }
    const int64_t radix = simCase.algorithm == AlltoallAlgorithm::kBruckRadix ? simCase.shape.radix : 2;
    const int64_t perNode = hierarchical ? simCase.shape.ranksPerNode : 0;
    auto rule = std::find_if(rules.begin(), rules.end(), [&](const AlltoallRule& r) {
      return r.algorithm == simCase.algorithm && r.radix == radix && r.ranksPerNode == perNode;
    });
    if (rule == rules.end()) rule = rules.insert(rules.end(), AlltoallRule{simCase.algorithm, radix, {}, perNode});
    rule->predictions.push_back({simCase.shape.ranks, simCase.shape.blockBytes, ns});
  }
  return rules;
}

Status writeRules(const std::string& path, const messaging::Tuning& base, const std::vector<AlltoallRule>& rules,
                  const collectives::AlltoallCostModel& model) {
  IBDT_ASSIGN_OR_RETURN(messaging::Tuning ruled, collectives::withAlltoallRules(base, rules, model));
  return messaging::writeTuningFile(path, ruled);
}

}  // namespace ibdt::sim
