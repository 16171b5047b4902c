// ibdt-tune's interleaved rounds (transport/messaging/tuning_rounds.h,
// docs/tuning.md "Rounds"): paths are compared within each round, so a phase
// that slows every path alike or one round's spike does not reorder them;
// where a round's own winner beats the overall one by more than the margin
// the rounds disagree and the file says so. The file's "rounds" object is
// untrusted input like the rest.
#include "transport/messaging/tuning_rounds.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace ibdt::messaging {
namespace {

constexpr size_t kPipelined = static_cast<size_t>(TunedPath::kPipelined);
constexpr size_t kRwgUp = static_cast<size_t>(TunedPath::kRwgUp);
constexpr size_t kGeneric = static_cast<size_t>(TunedPath::kGeneric);

// Pipelined eager, RWG-UP and Generic timed per round (ns).
RoundTimings threePaths(std::vector<double> pipelined, std::vector<double> rwgUp, std::vector<double> generic) {
  RoundTimings timings;
  timings[kPipelined] = std::move(pipelined);
  timings[kRwgUp] = std::move(rwgUp);
  timings[kGeneric] = std::move(generic);
  return timings;
}

TEST(TuningRounds, APhaseThatSlowsEveryPathAlikeChangesNoRatio) {
  // Round 2 is 4x slower for every path: the prices are the rounds' ratios
  // times the median round's scale, as if every round had been the median one.
  auto combined = combineRounds(threePaths({10, 11, 40, 10, 10}, {20, 22, 80, 20, 20}, {30, 33, 120, 30, 30}), 65536, 128);
  ASSERT_TRUE(combined.isOk()) << combined.status().toString();
  EXPECT_DOUBLE_EQ(*combined->ns[kPipelined], 10);
  EXPECT_DOUBLE_EQ(*combined->ns[kRwgUp], 20);
  EXPECT_DOUBLE_EQ(*combined->ns[kGeneric], 30);
  EXPECT_FALSE(combined->ns[static_cast<size_t>(TunedPath::kBcSpup)].has_value());  // not timed
  EXPECT_FALSE(combined->disagreement.has_value());
}

TEST(TuningRounds, OneRoundsSpikeOnOnePathDoesNotReorderThem) {
  RoundTimings timings;
  timings[kPipelined] = {10, 10, 500, 10, 10};  // a spike in one round
  timings[kGeneric] = {12, 12, 12, 12, 12};
  auto combined = combineRounds(timings, 65536, 128);
  ASSERT_TRUE(combined.isOk());
  EXPECT_LT(*combined->ns[kPipelined], *combined->ns[kGeneric]);
  // That round's winner took 12/500 of the overall winner's time: flagged.
  ASSERT_TRUE(combined->disagreement.has_value());
  EXPECT_EQ(combined->disagreement->chosen, TunedPath::kPipelined);
  EXPECT_EQ(combined->disagreement->roundWinner, TunedPath::kGeneric);
  EXPECT_DOUBLE_EQ(combined->disagreement->ratio, 12.0 / 500);
  EXPECT_EQ(combined->disagreement->bytes, 65536);
  EXPECT_EQ(combined->disagreement->blocks, 128);
}

// The machine's two regimes: pieces-wise paths 3-4x slower in the slow one,
// Generic 1.3x. Three fast rounds of five: pipelined eager is the choice, and
// the slow rounds, where Generic won by more than the margin, are the disagreement.
TEST(TuningRounds, TheMajorityRegimeChoosesAndTheOtherIsFlagged) {
  auto combined = combineRounds(threePaths({8, 36, 8, 35, 9}, {12, 39, 12, 40, 12}, {16, 21, 16, 20, 16}), 65536, 128);
  ASSERT_TRUE(combined.isOk());
  EXPECT_LT(*combined->ns[kPipelined], *combined->ns[kGeneric]);
  ASSERT_TRUE(combined->disagreement.has_value());
  EXPECT_EQ(combined->disagreement->roundWinner, TunedPath::kGeneric);
  EXPECT_DOUBLE_EQ(combined->disagreement->ratio, 20.0 / 35);  // the round that contradicts most
  // Within the margin (a round's winner 5 % faster): noise, not flagged.
  combined = combineRounds(threePaths({10, 10, 10, 10, 10}, {20, 20, 20, 20, 20}, {11, 11, 9.5, 11, 11}), 65536, 128);
  ASSERT_TRUE(combined.isOk());
  EXPECT_FALSE(combined->disagreement.has_value());
}

TEST(TuningRounds, TiesGoToTheEarlierPathAndBadTimingsAreRefused) {
  RoundTimings timings;
  timings[kGeneric] = {10, 10, 10};
  timings[kRwgUp] = {10, 10, 10};
  auto combined = combineRounds(timings, 1, 1);
  ASSERT_TRUE(combined.isOk());
  EXPECT_EQ(*combined->ns[kRwgUp], *combined->ns[kGeneric]);
  EXPECT_FALSE(combined->disagreement.has_value());
  EXPECT_TRUE(combineRounds(RoundTimings{}, 1, 1).isOk());  // nothing timed: nothing priced
  timings[kGeneric] = {10, 10};
  EXPECT_NE(combineRounds(timings, 1, 1).status().toString().find("rounds"), std::string::npos);
  timings[kGeneric] = {10, 0, 10};
  EXPECT_FALSE(combineRounds(timings, 1, 1).isOk());
}

Tuning withRounds() {
  Tuning tuning;
  tuning.key = HostKey{"Test CPU", "family 6 model 85 stepping 7", 2, "loopback", "0.0.0-test"};
  tuning.minBytes = 65536;
  tuning.maxBytes = 1 << 20;
  tuning.cost(TunedPath::kPipelined) = PathCost{true, 1000, 0.2, 1};
  tuning.rounds = {5, 10, {{1048576, 128, TunedPath::kPipelined, TunedPath::kPRrs, 0.29}}};
  return tuning;
}

TEST(TuningRounds, TheFileKeepsThemAndAFileWithoutIsUnchanged) {
  auto parsed = parseTuning(serializeTuning(withRounds()));
  ASSERT_TRUE(parsed.isOk()) << parsed.status().toString();
  EXPECT_EQ(parsed->rounds.count, 5);
  EXPECT_EQ(parsed->rounds.layouts, 10);
  ASSERT_EQ(parsed->rounds.disagreements.size(), 1u);
  const RoundDisagreement& d = parsed->rounds.disagreements[0];
  EXPECT_EQ(d.bytes, 1048576);
  EXPECT_EQ(d.blocks, 128);
  EXPECT_EQ(d.chosen, TunedPath::kPipelined);
  EXPECT_EQ(d.roundWinner, TunedPath::kPRrs);
  EXPECT_DOUBLE_EQ(d.ratio, 0.29);
  Tuning plain = withRounds();
  plain.rounds = {};
  const std::string text = serializeTuning(plain);
  EXPECT_EQ(text.find("rounds"), std::string::npos);
  EXPECT_EQ(parseTuning(text)->rounds.count, 0);
}

TEST(TuningRounds, HostileRoundsAreRefusedNamingWhat) {
  const nlohmann::json good = nlohmann::json::parse(serializeTuning(withRounds()));
  auto edited = [&](auto edit) {
    nlohmann::json root = good;
    edit(root["rounds"]);
    return root.dump();
  };
  using J = nlohmann::json;
  const struct {
    std::string text;
    const char* mentions;
  } cases[] = {
      {edited([](J& r) { r = "five"; }), "expected an object"},
      {edited([](J& r) { r["count"] = 0; }), "\"count\""},
      {edited([](J& r) { r["count"] = 2.5; }), "must be integers"},
      {edited([](J& r) { r["count"] = 1e300; }), "\"count\""},
      {edited([](J& r) { r.erase("layouts"); }), "missing \"layouts\""},
      {edited([](J& r) { r["disagreements"] = {{"bytes", 1}}; }), "must be an array"},
      {edited([](J& r) { r["disagreements"][0]["chosen"] = "warp-drive"; }), "unknown path \"warp-drive\""},
      {edited([](J& r) { r["disagreements"][0]["round_winner"] = 7; }), "\"round_winner\" must be a string"},
      {edited([](J& r) { r["disagreements"][0]["ratio"] = 1.5; }), "\"ratio\""},
      {edited([](J& r) { r["disagreements"][0]["bytes"] = -1; }), "\"bytes\""},
      {edited([](J& r) { r["disagreements"][0] = J::array({1, 2}); }), "expected an object"},
      {edited([](J& r) { r["layouts"] = 0; }), "at most one per layout"},
      {edited([](J& r) {
         r["layouts"] = 1000;
         for (int i = 0; i < 40; ++i) r["disagreements"].push_back(r["disagreements"][0]);
       }),
       "at most one per layout and 32"},
  };
  for (const auto& c : cases) {
    auto parsed = parseTuning(c.text);
    ASSERT_FALSE(parsed.isOk()) << c.mentions;
    EXPECT_EQ(parsed.status().code(), Code::kInvalidArgument);
    EXPECT_NE(parsed.status().toString().find(c.mentions), std::string::npos) << parsed.status().toString();
  }
}

}  // namespace
}  // namespace ibdt::messaging
