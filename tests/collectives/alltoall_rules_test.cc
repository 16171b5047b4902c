// kAuto beyond the ranks a machine runs: ibdt-sim's predictions in the
// tuning file ("alltoall-sim/<variant>" fits, collectives/alltoall_rules.h,
// docs/simulator.md "Rules for the selection") decide where they cover
// (p, block) and nothing is timed there, before the α-β fit; the file
// round-trips; hostile or truncated rule entries are refused naming them,
// and a file with one leaves its rules out.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "collectives/alltoall_rules.h"
#include "collectives/alltoall_select.h"
#include "collectives/tuning_favouring.h"

namespace ibdt::collectives {
namespace {

using messaging::CollectiveSample;
using messaging::Tuning;
using testing::tuningFavouring;

constexpr int kP = 256;

// Predicted µs at p = 256 for blocks of 8, 64 and 4096 bytes: radix 4
// best at 8 B, radix 8 at 64 B, pairwise at 4096 B.
std::vector<AlltoallRule> rulesAt256() {
  auto rule = [](AlltoallAlgorithm algorithm, int64_t radix, double us8, double us64, double us4096) {
    return AlltoallRule{algorithm, radix, {{kP, 8, us8 * 1e3}, {kP, 64, us64 * 1e3}, {kP, 4096, us4096 * 1e3}}};
  };
  return {rule(AlltoallAlgorithm::kPairwise, 2, 260, 270, 700),
          rule(AlltoallAlgorithm::kBruckZeroCopy, 2, 70, 100, 3200),
          rule(AlltoallAlgorithm::kBruckRadix, 4, 40, 70, 2300),
          rule(AlltoallAlgorithm::kBruckRadix, 8, 45, 60, 1800)};
}

// Fits under which zero-copy Bruck wins everywhere, with the rules above,
// through the file's text (what a Context would load).
Tuning fileWithRules() {
  const Tuning base = tuningFavouring(AlltoallAlgorithm::kBruckZeroCopy);
  auto ruled = withAlltoallRules(base, rulesAt256(), AlltoallCostModel::fromTuning(&base));
  EXPECT_TRUE(ruled.isOk()) << ruled.status().toString();
  auto parsed = messaging::parseTuning(messaging::serializeTuning(*ruled));
  EXPECT_TRUE(parsed.isOk()) << parsed.status().toString();
  return *parsed;
}

std::string name(const AlltoallChoice& choice) { return alltoallRuleName(choice.algorithm, choice.radix); }

TEST(AlltoallRules, TheFilesBestIsChosenWhereItsRulesCover) {
  const Tuning tuning = fileWithRules();
  const Tuning plain = tuningFavouring(AlltoallAlgorithm::kBruckZeroCopy);
  const AlltoallCostModel model = AlltoallCostModel::fromTuning(&tuning);
  const AlltoallCostModel fitOnly = AlltoallCostModel::fromTuning(&plain);
  const struct {
    int64_t block;
    const char* best;
  } points[] = {{8, "alltoall-sim/bruck-radix-4"}, {64, "alltoall-sim/bruck-radix-8"}, {4096, "alltoall-sim/pairwise"}};
  for (const auto& point : points) {
    SCOPED_TRACE(point.block);
    EXPECT_EQ(name(selectAlltoall(fitOnly, kP, point.block)), "alltoall-sim/bruck-zero-copy");  // the fit's choice
    for (int nodes : {1, 16}) {
      EXPECT_EQ(name(selectAlltoall(model, kP, point.block, true, nodes)), point.best);
      EXPECT_EQ(name(selectAlltoall(model, kP, point.block, true, nodes)), point.best);  // deterministic
    }
  }
  // A prediction is the simulated platform's time, its network included.
  EXPECT_EQ(model.predictNs(AlltoallAlgorithm::kBruckRadix, 8, kP, 64, 16), 60e3);
  // Between predicted sizes, interpolated as timings are (radix 8 leads at 512 B).
  EXPECT_EQ(name(selectAlltoall(model, kP, 512)), "alltoall-sim/bruck-radix-8");
  // Where no rule covers: the fit (another p, beyond the sizes predicted, empty blocks).
  for (auto [p, block] : {std::pair{200, int64_t{64}}, {kP, 4}, {kP, 65536}}) {
    EXPECT_EQ(name(selectAlltoall(model, p, block)), name(selectAlltoall(fitOnly, p, block))) << p << " " << block;
  }
  EXPECT_EQ(selectAlltoall(model, kP, 0).algorithm, AlltoallAlgorithm::kPairwise);
}

// Only variants with a rule compete where rules cover; without a pairwise
// rule, the cheapest ruled variant wins however cheap the fit of another.
TEST(AlltoallRules, OnlyRuledVariantsCompete) {
  Tuning base = tuningFavouring(AlltoallAlgorithm::kBruckZeroCopy);
  const std::vector<AlltoallRule> rules = {{AlltoallAlgorithm::kBruckBasic, 2, {{kP, 64, 5e6}}},
                                           {AlltoallAlgorithm::kBruckRadix, 3, {{kP, 64, 4e6}}}};
  auto ruled = withAlltoallRules(base, rules, AlltoallCostModel::fromTuning(&base));
  ASSERT_TRUE(ruled.isOk()) << ruled.status().toString();
  const AlltoallCostModel model = AlltoallCostModel::fromTuning(&*ruled);
  EXPECT_EQ(name(selectAlltoall(model, kP, 64)), "alltoall-sim/bruck-radix-3");
}

// Timings at a p outrank predictions at that p.
TEST(AlltoallRules, TimingsOutrankPredictions) {
  Tuning tuning = tuningFavouring(AlltoallAlgorithm::kPairwise);
  for (messaging::CollectiveFit& fit : tuning.collectives) {
    if (fit.name == alltoallFitName(AlltoallAlgorithm::kPairwise)) fit.samples = {{4, 64, 1000}};
  }
  auto ruled = withAlltoallRules(tuning, {{AlltoallAlgorithm::kBruckRadix, 3, {{4, 64, 10}}}},
                                 AlltoallCostModel::fromTuning(&tuning));
  ASSERT_TRUE(ruled.isOk()) << ruled.status().toString();
  const AlltoallCostModel model = AlltoallCostModel::fromTuning(&*ruled);
  EXPECT_EQ(selectAlltoall(model, 4, 64).algorithm, AlltoallAlgorithm::kPairwise);
}

TEST(AlltoallRules, RoundTripThroughTheFile) {
  const Tuning tuning = fileWithRules();
  auto rules = alltoallRules(tuning);
  ASSERT_TRUE(rules.isOk()) << rules.status().toString();
  ASSERT_EQ(rules->size(), rulesAt256().size());
  for (const AlltoallRule& written : rulesAt256()) {  // the file keeps its fits in name order
    auto read = std::find_if(rules->begin(), rules->end(), [&](const AlltoallRule& rule) {
      return rule.algorithm == written.algorithm && rule.radix == written.radix;
    });
    ASSERT_NE(read, rules->end()) << alltoallRuleName(written.algorithm, written.radix);
    ASSERT_EQ(read->predictions.size(), written.predictions.size());
    for (size_t i = 0; i < written.predictions.size(); ++i) {
      EXPECT_EQ(read->predictions[i].ranks, written.predictions[i].ranks);
      EXPECT_EQ(read->predictions[i].blockBytes, written.predictions[i].blockBytes);
      EXPECT_EQ(read->predictions[i].ns, written.predictions[i].ns);
    }
  }
  // Writing again replaces the rules (none left: none written).
  auto cleared = withAlltoallRules(tuning, {}, AlltoallCostModel::fromTuning(&tuning));
  ASSERT_TRUE(cleared.isOk());
  EXPECT_TRUE(alltoallRules(*cleared)->empty());
  EXPECT_EQ(cleared->collectives.size(), tuningFavouring(AlltoallAlgorithm::kPairwise).collectives.size());
}

// The text of fileWithRules() with its fits edited, or its pairwise rule renamed `to`.
std::string edited(const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json root = nlohmann::json::parse(messaging::serializeTuning(fileWithRules()));
  edit(root["collectives"]["fits"]);
  return root.dump();
}
std::string renamed(const std::string& to) {
  return edited([&](nlohmann::json& fits) {
    fits[to] = fits["alltoall-sim/pairwise"];
    fits.erase("alltoall-sim/pairwise");
  });
}

TEST(AlltoallRules, HostileRuleNamesAreRefusedNamingTheEntry) {
  for (const char* bad : {"alltoall-sim/bruck-radix-1", "alltoall-sim/bruck-radix-0", "alltoall-sim/bruck-radix-08",
                          "alltoall-sim/bruck-radix-", "alltoall-sim/bruck-radix-4096",
                          "alltoall-sim/bruck-radix-99999999999999999999999", "alltoall-sim/bruck-radix-4x",
                          "alltoall-sim/hierarchical", "alltoall-sim/auto", "alltoall-sim/bruck-radix",
                          "alltoall-sim/", "alltoall-sim/quicksort", "alltoall-sim/hierarchical-0-per-node",
                          "alltoall-sim/hierarchical-016-per-node", "alltoall-sim/hierarchical-65537-per-node",
                          "alltoall-sim/hierarchical--per-node", "alltoall-sim/hierarchical-4-per-nodes",
                          "alltoall-sim/hierarchical-4"}) {
    SCOPED_TRACE(bad);
    auto parsed = messaging::parseTuning(renamed(bad));
    ASSERT_TRUE(parsed.isOk()) << parsed.status().toString();  // the file format is fine
    auto rules = alltoallRules(*parsed);
    ASSERT_FALSE(rules.isOk());
    EXPECT_EQ(rules.status().code(), Code::kInvalidArgument);
    EXPECT_NE(rules.status().toString().find(std::string("rule \"") + bad + "\""), std::string::npos)
        << rules.status().toString();
    // Loaded: every rule is left out (the fit's choice), the fits stay.
    const AlltoallCostModel model = AlltoallCostModel::fromTuning(&*parsed);
    EXPECT_TRUE(model.fromFile());
    EXPECT_EQ(selectAlltoall(model, kP, 8).algorithm, AlltoallAlgorithm::kBruckZeroCopy);
  }
}

TEST(AlltoallRules, HostileOrTruncatedPredictionsAreRefused) {
  const struct {
    std::function<void(nlohmann::json&)> edit;
    const char* words;
  } cases[] = {
      {[](nlohmann::json& f) { f["alltoall-sim/pairwise"]["samples"][1] = {256, 64}; }, "[ranks, block_bytes, ns]"},
      {[](nlohmann::json& f) { f["alltoall-sim/pairwise"]["samples"][1][2] = -5; }, "sample ns out of range"},
      {[](nlohmann::json& f) { f["alltoall-sim/pairwise"]["samples"][1][2] = "fast"; }, "[ranks, block_bytes, ns]"},
      {[](nlohmann::json& f) { f["alltoall-sim/pairwise"]["samples"][1][0] = 1e12; }, "sample ranks out of range"},
      {[](nlohmann::json& f) { f["alltoall-sim/pairwise"]["samples"][1] = f["alltoall-sim/pairwise"]["samples"][0]; },
       "two samples at 256 ranks, 8 B"},
      {[](nlohmann::json& f) { f["alltoall-sim/pairwise"]["samples"] = "many"; }, "\"samples\" must be an array"},
      {[](nlohmann::json& f) { f["alltoall-sim/pairwise"].erase("per_byte_ns"); }, "missing \"per_byte_ns\""},
  };
  for (const auto& c : cases) {
    auto parsed = messaging::parseTuning(edited(c.edit));
    ASSERT_FALSE(parsed.isOk()) << c.words;
    EXPECT_NE(parsed.status().toString().find(c.words), std::string::npos) << parsed.status().toString();
    EXPECT_NE(parsed.status().toString().find("alltoall-sim/pairwise"), std::string::npos)
        << parsed.status().toString();
  }
  // A rule without predictions: the file parses, the rule is refused.
  auto empty = messaging::parseTuning(edited([](nlohmann::json& f) { f["alltoall-sim/pairwise"].erase("samples"); }));
  ASSERT_TRUE(empty.isOk()) << empty.status().toString();
  EXPECT_NE(alltoallRules(*empty).status().toString().find("no predictions"), std::string::npos);
  // Truncated anywhere in the rules: not valid JSON.
  const std::string text = messaging::serializeTuning(fileWithRules());
  for (size_t cut = text.find("alltoall-sim/"); cut < text.size(); cut += 97) {
    auto truncated = messaging::parseTuning(std::string_view(text).substr(0, cut));
    ASSERT_FALSE(truncated.isOk()) << cut;
    EXPECT_NE(truncated.status().toString().find("truncated"), std::string::npos) << truncated.status().toString();
  }
}

TEST(AlltoallRules, WritingRefusesWhatAReaderWould) {
  const Tuning base = tuningFavouring(AlltoallAlgorithm::kPairwise);
  const AlltoallCostModel model = AlltoallCostModel::fromTuning(&base);
  auto refused = [&](std::vector<AlltoallRule> rules, const char* words) {
    auto written = withAlltoallRules(base, std::move(rules), model);
    ASSERT_FALSE(written.isOk()) << words;
    EXPECT_NE(written.status().toString().find(words), std::string::npos) << written.status().toString();
  };
  AlltoallRule many{AlltoallAlgorithm::kPairwise, 2, {}};
  for (int64_t b = 1; b <= 65; ++b) many.predictions.push_back({kP, b, 1000});
  refused({many}, "65 predictions, a fit holds at most 64");
  refused({{AlltoallAlgorithm::kPairwise, 2, {}}}, "no predictions");
  refused({{AlltoallAlgorithm::kPairwise, 2, {{kP, 8, std::numeric_limits<double>::quiet_NaN()}}}},
          "the prediction at 256 ranks, 8 B is nan ns");
  refused({{AlltoallAlgorithm::kPairwise, 2, {{kP, 8, 1}, {kP, 8, 2}}}}, "two samples at 256 ranks, 8 B");
  refused({{AlltoallAlgorithm::kBruckRadix, 1, {{kP, 8, 1}}}}, "radix must be an integer in [2, 4096)");
}

}  // namespace
}  // namespace ibdt::collectives
