// The simulated rules in the tuning file (alltoall_rules.h).
#include "collectives/alltoall_rules.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "base/parse_integer.h"
#include "collectives/alltoall_select.h"

namespace ibdt::collectives {
namespace {

constexpr int64_t kMaxRuleRanksPerNode = 1 << 16;  // ibdt-sim's --ranks-per-node limit

Status badRule(std::string_view name, std::string_view what) {
  return makeError(Code::kInvalidArgument, "tuning file: rule \"", name.substr(0, 64), "\": ", what);
}

// "<algorithm>", "bruck-radix-<r>" (as AlltoallChoice::name() spells them) or
// "hierarchical-<n>-per-node", an algorithm kAuto prices.
Result<AlltoallRule> parseVariant(std::string_view fitName) {
  std::string_view variant = fitName.substr(kAlltoallRulePrefix.size());
  AlltoallRule rule;
  // The hierarchical alltoall's time depends on the node layout: its rule holds one ranks-per-node count.
  constexpr std::string_view kHierarchicalPrefix = "hierarchical-", kPerNodeSuffix = "-per-node";
  if (variant.starts_with(kHierarchicalPrefix) && variant.ends_with(kPerNodeSuffix)) {
    variant.remove_prefix(kHierarchicalPrefix.size());
    variant.remove_suffix(kPerNodeSuffix.size());
    const std::optional<int64_t> perNode = parseCanonicalPositive(variant, kMaxRuleRanksPerNode + 1);
    if (!perNode) return badRule(fitName, strCat("ranks per node must be an integer in [1, ", kMaxRuleRanksPerNode, "]"));
    rule.algorithm = AlltoallAlgorithm::kHierarchical;
    rule.ranksPerNode = *perNode;
    return rule;
  }
  Result<AlltoallOptions> options = withAlltoallAlgorithm({}, variant);
  if (!options.isOk()) return badRule(fitName, options.status().message());
  const AlltoallChoice choice{options->algorithm, options->radix, 0};
  const bool priced =
      std::find(kPricedAlltoalls.begin(), kPricedAlltoalls.end(), choice.algorithm) != kPricedAlltoalls.end();
  // "bruck-radix" alone names no radix: only the spelling name() gives is a rule.
  if (!priced || choice.name() != variant) return badRule(fitName, "not an algorithm the automatic choice prices");
  if (choice.algorithm == AlltoallAlgorithm::kHierarchical) {
    return badRule(fitName, "a hierarchical rule names its node layout: hierarchical-<ranks per node>-per-node");
  }
  rule.algorithm = choice.algorithm;
  if (choice.algorithm == AlltoallAlgorithm::kBruckRadix) rule.radix = choice.radix;
  return rule;
}

}  // namespace

std::optional<double> rulePredictionNs(const AlltoallRule& rule, int p, int64_t blockBytes) {
  if (auto exact = sampledNs(rule.predictions, p, blockBytes)) return exact;
  // The nearest simulated rank counts on either side of p that cover the block size.
  std::optional<std::pair<int64_t, double>> below, above;
  for (const messaging::CollectiveSample& prediction : rule.predictions) {
    const int64_t ranks = prediction.ranks;
    if (ranks == p || ranks > std::numeric_limits<int>::max()) continue;
    const bool nearer = ranks < p ? !below || ranks > below->first : !above || ranks < above->first;
    if (!nearer) continue;
    const std::optional<double> ns = sampledNs(rule.predictions, static_cast<int>(ranks), blockBytes);
    if (!ns) continue;
    (ranks < p ? below : above) = std::pair{ranks, *ns};
  }
  if (!below || !above) return std::nullopt;
  const double at = std::log(double(p) / double(below->first)) / std::log(double(above->first) / double(below->first));
  return below->second * std::pow(above->second / below->second, at);
}

AlltoallRulesCoverage rulesCoverage(const std::vector<AlltoallRule>& rules) {
  AlltoallRulesCoverage coverage;
  for (const AlltoallRule& rule : rules) {
    coverage.variants.push_back(
        alltoallRuleName(rule.algorithm, rule.radix, rule.ranksPerNode).substr(kAlltoallRulePrefix.size()));
    coverage.predictions += rule.predictions.size();
    for (const messaging::CollectiveSample& prediction : rule.predictions) {
      coverage.ranks.push_back(prediction.ranks);
      coverage.blockBytes.push_back(prediction.blockBytes);
    }
  }
  for (std::vector<int64_t>* values : {&coverage.ranks, &coverage.blockBytes}) {
    std::sort(values->begin(), values->end());
    values->erase(std::unique(values->begin(), values->end()), values->end());
  }
  return coverage;
}

std::string AlltoallRulesCoverage::describe() const {
  if (variants.empty()) return "no rules";
  auto list = [](const auto& values) {
    std::string text;
    for (const auto& value : values) text += strCat(text.empty() ? "" : ", ", value);
    return text;
  };
  return strCat(variants.size(), variants.size() == 1 ? " rule (" : " rules (", list(variants), "), ", predictions,
                " predictions at ", list(ranks), " ranks (",
                ranks.size() > 1 ? "interpolated between, " : "", "the fits beyond) and blocks of ", list(blockBytes),
                " B");
}

std::string alltoallRuleName(AlltoallAlgorithm algorithm, int64_t radix, int64_t ranksPerNode) {
  if (algorithm == AlltoallAlgorithm::kHierarchical) {
    return strCat(kAlltoallRulePrefix, "hierarchical-", ranksPerNode, "-per-node");
  }
  return strCat(kAlltoallRulePrefix, AlltoallChoice{algorithm, radix}.name());
}

Result<std::vector<AlltoallRule>> alltoallRules(const messaging::Tuning& tuning) {
  std::vector<AlltoallRule> rules;
  for (const messaging::CollectiveFit& fit : tuning.collectives) {
    if (!fit.name.starts_with(kAlltoallRulePrefix)) continue;
    IBDT_ASSIGN_OR_RETURN(AlltoallRule rule, parseVariant(fit.name));
    if (fit.samples.empty()) return badRule(fit.name, "no predictions (\"samples\")");
    rule.predictions = fit.samples;
    rules.push_back(std::move(rule));
  }
  return rules;
}

Result<messaging::Tuning> withAlltoallRules(messaging::Tuning base, const std::vector<AlltoallRule>& rules,
                                            const AlltoallCostModel& model) {
  std::erase_if(base.collectives,
                [](const messaging::CollectiveFit& fit) { return fit.name.starts_with(kAlltoallRulePrefix); });
  for (const AlltoallRule& rule : rules) {
    const std::string name = alltoallRuleName(rule.algorithm, rule.radix, rule.ranksPerNode);
    if (rule.predictions.empty()) return badRule(name, "no predictions");
    if (rule.predictions.size() > messaging::kMaxCollectiveSamples) {
      return badRule(name, strCat(rule.predictions.size(), " predictions, a fit holds at most ",
                                  messaging::kMaxCollectiveSamples, " (fewer --ranks or --block-sizes)"));
    }
    for (const messaging::CollectiveSample& prediction : rule.predictions) {
      if (!std::isfinite(prediction.ns) || prediction.ns <= 0) {  // JSON has no NaN: it would read back as null
        return badRule(name, strCat("the prediction at ", prediction.ranks, " ranks, ", prediction.blockBytes,
                                    " B is ", prediction.ns, " ns"));
      }
    }
    const messaging::CollectiveCost* cost = model.cost(rule.algorithm);
    base.collectives.push_back({name, cost != nullptr ? *cost : messaging::CollectiveCost{}, rule.predictions});
  }
  if (base.collectives.size() > messaging::kMaxCollectiveFits) {
    return makeError(Code::kInvalidArgument, "tuning file: ", base.collectives.size(),
                     " collective fits with the rules, at most ", messaging::kMaxCollectiveFits);
  }
  // What a reader would refuse (a repeated point, a time out of range, the
  // file's size) is refused here, before anything is written.
  IBDT_ASSIGN_OR_RETURN(messaging::Tuning reread, messaging::parseTuning(messaging::serializeTuning(base)));
  IBDT_RETURN_IF_ERROR(alltoallRules(reread).status());
  return base;
}

}  // namespace ibdt::collectives
