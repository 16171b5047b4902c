// ibdt-sim's rules between the rank counts it simulated
// (collectives/alltoall_rules.h, rulePredictionNs; docs/simulator.md "Rules
// for the selection"): kAuto at a p between two simulated rank counts picks
// what the log-log interpolation of their predicted times says, uses only the
// nearest bracketing pair that covers the block size, never extrapolates
// beyond the outermost simulated p (the α-β fit prices there), and decides
// the same whatever order the file lists the predictions in.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "collectives/alltoall_rules.h"
#include "collectives/alltoall_select.h"
#include "collectives/tuning_favouring.h"

namespace ibdt::collectives {
namespace {

using messaging::CollectiveSample;
using messaging::Tuning;
using testing::tuningFavouring;

// Predicted µs at 64 and 256 ranks, blocks of 64 B: pairwise grows as p^2
// (100 -> 1600), radix-4 Bruck as p^0.79 (300 -> 900). Log-log in p they
// cross near p = 159: pairwise at 128 (400 against 520 µs), radix 4 at 192
// (900 against 716). Linear interpolation would have picked radix 4 at 128
// (600 against 500 µs).
std::vector<AlltoallRule> rulesAt64And256() {
  return {{AlltoallAlgorithm::kPairwise, 2, {{64, 64, 100e3}, {256, 64, 1600e3}}},
          {AlltoallAlgorithm::kBruckRadix, 4, {{64, 64, 300e3}, {256, 64, 900e3}}}};
}

// The fits favour zero-copy Bruck: where no rule covers, the fit's choice shows.
Tuning fileWith(const std::vector<AlltoallRule>& rules) {
  const Tuning base = tuningFavouring(AlltoallAlgorithm::kBruckZeroCopy);
  auto ruled = withAlltoallRules(base, rules, AlltoallCostModel::fromTuning(&base));
  EXPECT_TRUE(ruled.isOk()) << ruled.status().toString();
  auto parsed = messaging::parseTuning(messaging::serializeTuning(*ruled));  // what a Context loads
  EXPECT_TRUE(parsed.isOk()) << parsed.status().toString();
  return *parsed;
}

double powerLaw(double p, double p0, double ns0, double p1, double ns1) {
  return ns0 * std::pow(ns1 / ns0, std::log(p / p0) / std::log(p1 / p0));
}

TEST(AlltoallRuleInterpolation, BetweenSimulatedRankCountsThePowerLawDecides) {
  const Tuning tuning = fileWith(rulesAt64And256());
  const AlltoallCostModel model = AlltoallCostModel::fromTuning(&tuning);
  EXPECT_NEAR(model.predictNs(AlltoallAlgorithm::kPairwise, 2, 128, 64), 400e3, 1);
  EXPECT_NEAR(model.predictNs(AlltoallAlgorithm::kBruckRadix, 4, 128, 64), powerLaw(128, 64, 300e3, 256, 900e3), 1);
  EXPECT_EQ(selectAlltoall(model, 128, 64).algorithm, AlltoallAlgorithm::kPairwise);
  const AlltoallChoice at192 = selectAlltoall(model, 192, 64);
  EXPECT_EQ(at192.algorithm, AlltoallAlgorithm::kBruckRadix);
  EXPECT_EQ(at192.radix, 4);
  EXPECT_NEAR(at192.predictedNs, powerLaw(192, 64, 300e3, 256, 900e3), 1);
  // At the simulated rank counts, their own predictions.
  EXPECT_EQ(model.predictNs(AlltoallAlgorithm::kPairwise, 2, 256, 64), 1600e3);
  EXPECT_EQ(selectAlltoall(model, 64, 64).algorithm, AlltoallAlgorithm::kPairwise);
  EXPECT_EQ(selectAlltoall(model, 256, 64).algorithm, AlltoallAlgorithm::kBruckRadix);
  // Between block sizes nothing was predicted at either p: the fit.
  EXPECT_FALSE(model.simulatedAt(128, 4096));
  EXPECT_EQ(selectAlltoall(model, 128, 4096).algorithm, AlltoallAlgorithm::kBruckZeroCopy);
}

TEST(AlltoallRuleInterpolation, NeverBeyondTheOutermostSimulatedRankCounts) {
  const Tuning tuning = fileWith(rulesAt64And256());
  const Tuning plain = tuningFavouring(AlltoallAlgorithm::kBruckZeroCopy);
  const AlltoallCostModel model = AlltoallCostModel::fromTuning(&tuning);
  const AlltoallCostModel fitOnly = AlltoallCostModel::fromTuning(&plain);
  for (int p : {3, 32, 63, 257, 512, 65536}) {
    SCOPED_TRACE(p);
    EXPECT_FALSE(model.simulatedAt(p, 64));
    EXPECT_FALSE(model.simulatedNs(AlltoallAlgorithm::kPairwise, 2, p, 64).has_value());
    EXPECT_EQ(selectAlltoall(model, p, 64).code(), selectAlltoall(fitOnly, p, 64).code());
    EXPECT_EQ(model.predictNs(AlltoallAlgorithm::kPairwise, 2, p, 64),
              fitOnly.predictNs(AlltoallAlgorithm::kPairwise, 2, p, 64));
  }
}

// The nearest rank counts on either side that cover the block size: with
// 64, 128 and 256 simulated, p = 100 uses 64 and 128; a block size predicted
// at 64 and 256 only is interpolated across 128.
TEST(AlltoallRuleInterpolation, TheNearestBracketingPairThatCoversTheBlock) {
  const AlltoallRule rule{AlltoallAlgorithm::kPairwise, 2,
                          {{64, 64, 100e3}, {128, 64, 150e3}, {256, 64, 1600e3}, {64, 8, 50e3}, {256, 8, 800e3}}};
  EXPECT_NEAR(*rulePredictionNs(rule, 100, 64), powerLaw(100, 64, 100e3, 128, 150e3), 1e-6);
  EXPECT_NEAR(*rulePredictionNs(rule, 200, 64), powerLaw(200, 128, 150e3, 256, 1600e3), 1e-6);
  EXPECT_NEAR(*rulePredictionNs(rule, 100, 8), powerLaw(100, 64, 50e3, 256, 800e3), 1e-6);
  // Block sizes as sampledNs: between 8 and 64 at both ends of the pair.
  const double low = powerLaw(32, 8, 50e3, 64, 100e3), high = powerLaw(32, 8, 800e3, 64, 1600e3);
  EXPECT_NEAR(*rulePredictionNs(rule, 128, 32), powerLaw(128, 64, low, 256, high), 1e-6);
  // One side lacks the block size: none.
  const AlltoallRule oneSided{AlltoallAlgorithm::kPairwise, 2, {{64, 64, 100e3}, {64, 8, 50e3}, {256, 8, 800e3}}};
  EXPECT_FALSE(rulePredictionNs(oneSided, 128, 64).has_value());
  EXPECT_TRUE(rulePredictionNs(oneSided, 128, 8).has_value());
  EXPECT_FALSE(rulePredictionNs(rule, 128, 0).has_value());  // empty blocks: pairwise, not a rule
}

TEST(AlltoallRuleInterpolation, DeterministicWhateverTheOrderOfPredictions) {
  AlltoallRule rule{AlltoallAlgorithm::kPairwise, 2,
                    {{64, 64, 100e3}, {128, 64, 150e3}, {256, 64, 1600e3}, {512, 64, 7000e3}, {64, 8, 50e3}}};
  const std::vector<int> ps = {65, 100, 127, 129, 200, 300, 511};
  std::vector<double> first;
  for (int p : ps) first.push_back(rulePredictionNs(rule, p, 64).value_or(-1));
  std::sort(rule.predictions.begin(), rule.predictions.end(),
            [](const CollectiveSample& a, const CollectiveSample& b) { return a.ns > b.ns; });
  do {
    for (size_t i = 0; i < ps.size(); ++i) EXPECT_EQ(rulePredictionNs(rule, ps[i], 64).value_or(-1), first[i]);
  } while (std::next_permutation(rule.predictions.begin(), rule.predictions.end(),
                                 [](const CollectiveSample& a, const CollectiveSample& b) { return a.ns > b.ns; }));
  for (double ns : first) EXPECT_GT(ns, 0);
}

// The hierarchical alltoall's rules carry their node layout: a rule of 16
// ranks per node prices it on ceil(p / nodes) = 16 only, on several nodes,
// interpolated between simulated p (node counts) like the others.
TEST(AlltoallRuleInterpolation, HierarchicalRulesHoldForTheirRanksPerNode) {
  std::vector<AlltoallRule> rules = rulesAt64And256();
  rules.push_back({AlltoallAlgorithm::kHierarchical, 2, {{64, 64, 80e3}, {256, 64, 400e3}}, 16});
  const Tuning tuning = fileWith(rules);
  auto read = alltoallRules(tuning);
  ASSERT_TRUE(read.isOk()) << read.status().toString();
  EXPECT_TRUE(std::any_of(read->begin(), read->end(), [](const AlltoallRule& rule) {
    return rule.algorithm == AlltoallAlgorithm::kHierarchical && rule.ranksPerNode == 16;
  }));
  EXPECT_NE(messaging::serializeTuning(tuning).find("alltoall-sim/hierarchical-16-per-node"), std::string::npos);
  const AlltoallCostModel model = AlltoallCostModel::fromTuning(&tuning);
  const AlltoallChoice at64 = selectAlltoall(model, 64, 64, true, 4);  // 4 nodes of 16
  EXPECT_EQ(at64.algorithm, AlltoallAlgorithm::kHierarchical);
  EXPECT_EQ(at64.predictedNs, 80e3);
  const AlltoallChoice at128 = selectAlltoall(model, 128, 64, true, 8);  // 8 nodes of 16
  EXPECT_EQ(at128.algorithm, AlltoallAlgorithm::kHierarchical);
  EXPECT_NEAR(at128.predictedNs, powerLaw(128, 64, 80e3, 256, 400e3), 1);
  // Another layout (2 nodes of 32, 16 of 4) or one node: no hierarchical rule; the ruled others compete.
  for (int nodes : {1, 2, 16}) {
    SCOPED_TRACE(nodes);
    EXPECT_FALSE(model.simulatedNs(AlltoallAlgorithm::kHierarchical, 2, 64, 64, nodes).has_value());
    EXPECT_EQ(selectAlltoall(model, 64, 64, true, nodes).algorithm, AlltoallAlgorithm::kPairwise);
  }
  // Not a collective init: not a candidate, whatever its rule says.
  EXPECT_EQ(selectAlltoall(model, 64, 64, false, 4).algorithm, AlltoallAlgorithm::kPairwise);
}

// What ibdt-info prints of the rules in force.
TEST(AlltoallRuleInterpolation, CoverageListsRulesRankCountsAndBlockSizes) {
  const Tuning tuning = fileWith(rulesAt64And256());
  auto rules = alltoallRules(tuning);
  ASSERT_TRUE(rules.isOk());
  const AlltoallRulesCoverage coverage = rulesCoverage(*rules);
  EXPECT_EQ(coverage.ranks, (std::vector<int64_t>{64, 256}));
  EXPECT_EQ(coverage.blockBytes, (std::vector<int64_t>{64}));
  EXPECT_EQ(coverage.predictions, 4u);
  const std::string text = coverage.describe();
  EXPECT_NE(text.find("2 rules (bruck-radix-4, pairwise)"), std::string::npos) << text;  // the file's name order
  EXPECT_NE(text.find("4 predictions at 64, 256 ranks (interpolated between, the fits beyond)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("blocks of 64 B"), std::string::npos) << text;
  EXPECT_EQ(rulesCoverage({}).describe(), "no rules");
  const AlltoallRule hierarchical{AlltoallAlgorithm::kHierarchical, 2, {{64, 8, 1e3}}, 16};
  EXPECT_EQ(rulesCoverage({hierarchical}).describe(),
            "1 rule (hierarchical-16-per-node), 1 predictions at 64 ranks (the fits beyond) and blocks of 8 B");
  const AlltoallRule single{AlltoallAlgorithm::kPairwise, 2, {{256, 8, 1e3}, {256, 4096, 2e3}}};
  EXPECT_EQ(rulesCoverage({single}).describe(),
            "1 rule (pairwise), 2 predictions at 256 ranks (the fits beyond) and blocks of 8, 4096 B");
}

}  // namespace
}  // namespace ibdt::collectives
