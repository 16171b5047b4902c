// ibdt-sim's replay (tools/sim/sim_run.h, docs/simulator.md): what the
// simulated ranks sent and received, counted inside SimGrid, is their
// schedule; a dearer on-node byte makes a run longer; bad platforms and
// cases are refused; the rules written from a simulation make the
// selection pick the simulated best.
#include "tools/sim/sim_run.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <limits>
#include <vector>

#include "tools/sim/sim_rules.h"

namespace ibdt::sim {
namespace {

using collectives::AlltoallAlgorithm;

SimCase makeCase(AlltoallAlgorithm algorithm, int p, int64_t block, int perNode) {
  SimCase simCase;
  simCase.algorithm = algorithm;
  simCase.shape.ranks = p;
  simCase.shape.blockBytes = block;
  simCase.shape.radix = 4;
  simCase.shape.ranksPerNode = perNode;
  simCase.shape.leaders = 2;
  simCase.onNode = {1000, 500, 0.5};
  simCase.counters = true;
  return simCase;
}

PlatformSpec fatTree(int nodes, int cores) {
  PlatformSpec spec;
  spec.nodes = nodes;
  spec.coresPerNode = cores;
  spec.leafRadix = 2;
  return spec;
}

TEST(SimReplay, EveryRankSendsAndReceivesItsSchedule) {
  const AlltoallAlgorithm algorithms[] = {AlltoallAlgorithm::kPairwise, AlltoallAlgorithm::kBruckBasic,
                                          AlltoallAlgorithm::kBruckModified, AlltoallAlgorithm::kBruckZeroCopy,
                                          AlltoallAlgorithm::kBruckRadix, AlltoallAlgorithm::kHierarchical};
  std::vector<SimCase> cases;
  for (AlltoallAlgorithm algorithm : algorithms) {
    cases.push_back(makeCase(algorithm, 16, 100, 4));
    cases.push_back(makeCase(algorithm, 13, 7, 4));  // a partial last node, p not a power of the radix
  }
  Result<std::vector<SimResult>> results = simulate(fatTree(4, 4), cases);
  ASSERT_TRUE(results.isOk()) << results.status().message();
  ASSERT_EQ(results->size(), cases.size());
  for (size_t c = 0; c < cases.size(); ++c) {
    const SimResult& result = (*results)[c];
    const std::string what = std::string(collectives::alltoallAlgorithmName(cases[c].algorithm)) + " p=" +
                             std::to_string(cases[c].shape.ranks);
    EXPECT_EQ(result.mismatch, "") << what;
    EXPECT_GT(result.seconds, 0) << what;
    ASSERT_EQ(result.ranks.size(), static_cast<size_t>(cases[c].shape.ranks)) << what;
    for (int rank = 0; rank < cases[c].shape.ranks; ++rank) {
      collectives::ScheduleShape shape = cases[c].shape;
      shape.rank = rank;
      Result<collectives::AlltoallSchedule> schedule = collectives::alltoallSchedule(cases[c].algorithm, shape);
      ASSERT_TRUE(schedule.isOk());
      EXPECT_EQ(result.ranks[static_cast<size_t>(rank)], collectives::scheduleTotals(*schedule))
          << what << " rank " << rank;
    }
  }
}

TEST(SimReplay, DearerOnNodeBytesTakeLonger) {
  std::vector<SimCase> cases;
  for (AlltoallAlgorithm algorithm : {AlltoallAlgorithm::kPairwise, AlltoallAlgorithm::kBruckModified}) {
    for (int perNode : {16, 4}) {  // one node, and four of the fat tree
      SimCase cheap = makeCase(algorithm, 16, 4096, perNode);
      SimCase dear = cheap;
      dear.onNode.perByteNs *= 2;
      cases.push_back(cheap);
      cases.push_back(dear);
    }
  }
  Result<std::vector<SimResult>> results = simulate(fatTree(4, 4), cases);
  ASSERT_TRUE(results.isOk()) << results.status().message();
  for (size_t c = 0; c < cases.size(); c += 2) {
    EXPECT_GT((*results)[c + 1].seconds, (*results)[c].seconds * 1.2) << "case " << c;
  }
}

// SimGrid's InfiniBand model (docs/simulator.md: it aborts on larger platforms).
TEST(SimReplay, InfiniBandModelRunsASmallFatTree) {
  PlatformSpec spec = fatTree(4, 4);
  spec.networkModel = "IB";
  const SimCase simCase = makeCase(AlltoallAlgorithm::kBruckModified, 16, 64, 4);
  Result<std::vector<SimResult>> results = simulate(spec, {simCase});
  ASSERT_TRUE(results.isOk()) << results.status().message();
  EXPECT_EQ((*results)[0].mismatch, "");
  EXPECT_GT((*results)[0].seconds, 0);
  collectives::ScheduleShape shape = simCase.shape;
  shape.rank = 5;
  Result<collectives::AlltoallSchedule> schedule = collectives::alltoallSchedule(simCase.algorithm, shape);
  ASSERT_TRUE(schedule.isOk());
  EXPECT_EQ((*results)[0].ranks[5], collectives::scheduleTotals(*schedule));
}

TEST(SimReplay, RefusesWhatDoesNotFit) {
  EXPECT_FALSE(simulate(fatTree(2, 4), {makeCase(AlltoallAlgorithm::kPairwise, 16, 8, 4)}).isOk());  // 4 nodes needed
  PlatformSpec tooSmall = fatTree(4, 4);
  tooSmall.fatTree = "1;2;1;1";  // 2 leaves for 4 nodes
  EXPECT_FALSE(simulate(tooSmall, {makeCase(AlltoallAlgorithm::kPairwise, 16, 8, 4)}).isOk());
  PlatformSpec garbled = fatTree(4, 4);
  garbled.fatTree = "2;4;x;1";
  EXPECT_FALSE(simulate(garbled, {makeCase(AlltoallAlgorithm::kPairwise, 16, 8, 4)}).isOk());
  PlatformSpec noBandwidth = fatTree(4, 4);
  noBandwidth.ibBandwidth = 0;
  EXPECT_FALSE(simulate(noBandwidth, {makeCase(AlltoallAlgorithm::kPairwise, 16, 8, 4)}).isOk());
}

// `ibdt-sim --write-rules`: a simulation at p = 16 over 4 nodes, written
// into a tuning file and loaded back, makes kAuto pick the variant the
// simulation found fastest, the hierarchical alltoall included (its rule
// holds for 4 ranks per node).
TEST(SimRules, TheWrittenRulesPickTheSimulatedBest) {
  std::vector<SimCase> cases;
  for (int64_t block : {8, 4096}) {
    for (AlltoallAlgorithm algorithm : {AlltoallAlgorithm::kPairwise, AlltoallAlgorithm::kBruckZeroCopy,
                                        AlltoallAlgorithm::kBruckRadix, AlltoallAlgorithm::kHierarchical}) {
      cases.push_back(makeCase(algorithm, 16, block, 4));
    }
  }
  Result<std::vector<SimResult>> results = simulate(fatTree(4, 4), cases);
  ASSERT_TRUE(results.isOk()) << results.status().message();
  const std::vector<collectives::AlltoallRule> rules = rulesFromResults(cases, *results);
  ASSERT_EQ(rules.size(), 4u);  // pairwise, zero-copy, radix 4, hierarchical of 4 ranks per node
  EXPECT_EQ(rules[3].ranksPerNode, 4);
  messaging::Tuning base;
  base.key = messaging::currentHostKey("shm");
  base.collectives.push_back({collectives::alltoallFitName(AlltoallAlgorithm::kPairwise), {500, 1000, 0.35}, {}});
  base.collectives.push_back({collectives::alltoallFitName(AlltoallAlgorithm::kBruckZeroCopy), {1500, 1500, 0.35}, {}});
  base.collectives.push_back({collectives::alltoallFitName(AlltoallAlgorithm::kBruckRadix), {1500, 1200, 0.5}, {}});
  base.collectives.push_back({collectives::alltoallFitName(AlltoallAlgorithm::kHierarchical), {1500, 1000, 0.5}, {}});
  const std::string path = ::testing::TempDir() + "ibdt-sim-rules-" + std::to_string(getpid()) + ".json";
  const auto model = collectives::AlltoallCostModel::fromTuning(&base);
  ASSERT_TRUE(writeRules(path, base, rules, model).isOk());
  const messaging::LoadedTuning loaded = messaging::loadTuning(path, base.key);
  std::filesystem::remove(path);
  ASSERT_TRUE(loaded.tuning.has_value()) << loaded.note;
  const auto ruled = collectives::AlltoallCostModel::fromTuning(&*loaded.tuning);
  for (size_t first = 0; first < cases.size(); first += 4) {
    size_t best = first;
    for (size_t c = first; c < first + 4; ++c) {
      if ((*results)[c].seconds < (*results)[best].seconds) best = c;
    }
    const int64_t block = cases[first].shape.blockBytes;
    const collectives::AlltoallChoice choice = collectives::selectAlltoall(ruled, 16, block, true, 4);
    EXPECT_EQ(choice.algorithm, cases[best].algorithm) << block << " B";
    EXPECT_NEAR(choice.predictedNs, (*results)[best].seconds * 1e9, 1e-3 * choice.predictedNs) << block << " B";
  }
  // A case that failed (SimGrid aborted: NaN) is left out of the rules.
  std::vector<SimResult> failed = *results;
  failed[0].seconds = std::numeric_limits<double>::quiet_NaN();
  for (const collectives::AlltoallRule& rule : rulesFromResults(cases, failed)) {
    EXPECT_EQ(rule.predictions.size(), rule.algorithm == AlltoallAlgorithm::kPairwise ? 1u : 2u);
  }
}

}  // namespace
}  // namespace ibdt::sim
