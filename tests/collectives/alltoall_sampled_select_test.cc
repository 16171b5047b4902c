// kAuto priced by the tuning file's own timings (format_version 3,
// docs/alltoall-selection.md "Samples"): the choice at sampled points,
// log-log interpolation between timed sizes, the fit outside them, the
// margin pairwise keeps, hostile or truncated sample sections refused, and
// older formats still loading.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "collectives/alltoall_select.h"
#include "collectives/tuning_favouring.h"

namespace ibdt::collectives {
namespace {

using messaging::CollectiveSample;
using messaging::Tuning;
using testing::tuningFavouring;

// Gives `algorithm`'s fit samples at p = 2..4 and 1 KiB, 4 KiB, 16 KiB
// blocks (replacing any it had): `ns(p, block)` each.
template <class Ns>
void addSamples(Tuning& tuning, AlltoallAlgorithm algorithm, Ns ns) {
  for (messaging::CollectiveFit& fit : tuning.collectives) {
    if (fit.name != alltoallFitName(algorithm)) continue;
    fit.samples.clear();
    for (int64_t p = 2; p <= 4; ++p) {
      for (int64_t block : {1024, 4096, 16384}) fit.samples.push_back({p, block, ns(p, block)});
    }
  }
}

TEST(AlltoallSamples, InterpolatesLogLogBetweenTimedSizes) {
  const std::vector<CollectiveSample> samples = {{4, 1024, 1000}, {4, 4096, 4000}, {4, 16384, 8000}, {3, 2048, 50}};
  EXPECT_EQ(sampledNs(samples, 4, 1024), 1000.0);
  EXPECT_EQ(sampledNs(samples, 4, 16384), 8000.0);
  // A power law between neighbours: 1 KiB -> 4 KiB is linear in size, 4 -> 16 KiB goes as the square root.
  EXPECT_NEAR(*sampledNs(samples, 4, 2048), 2000.0, 1e-6);
  EXPECT_NEAR(*sampledNs(samples, 4, 8192), 4000.0 * std::sqrt(2.0), 1e-6);
  // Outside the sizes timed at that p, at a p not timed, or empty blocks: nothing.
  EXPECT_FALSE(sampledNs(samples, 4, 512).has_value());
  EXPECT_FALSE(sampledNs(samples, 4, 32768).has_value());
  EXPECT_FALSE(sampledNs(samples, 5, 4096).has_value());
  EXPECT_FALSE(sampledNs(samples, 4, 0).has_value());
  EXPECT_EQ(sampledNs(samples, 3, 2048), 50.0);  // one sample: that size only
  EXPECT_FALSE(sampledNs(samples, 3, 4096).has_value());
}

// Fits that favour pairwise everywhere, samples in which zero-copy Bruck
// measured half of pairwise at p = 3 and 4: the samples decide where they
// exist, the fit beyond.
TEST(AlltoallSamples, SamplesDecideWhereTimedAndTheFitBeyond) {
  Tuning tuning = tuningFavouring(AlltoallAlgorithm::kPairwise);
  for (AlltoallAlgorithm algorithm : kModelledAlltoalls) {
    addSamples(tuning, algorithm, [](int64_t, int64_t block) { return 10.0 * double(block); });
  }
  addSamples(tuning, AlltoallAlgorithm::kBruckZeroCopy, [](int64_t, int64_t block) { return 5.0 * double(block); });
  const AlltoallCostModel model = AlltoallCostModel::fromTuning(&tuning);
  for (int p : {3, 4}) {
    for (int64_t block : {1024, 2048, 4096, 12000, 16384}) {
      EXPECT_TRUE(model.sampled(AlltoallAlgorithm::kPairwise, 2, p, block));
      const AlltoallChoice choice = selectAlltoall(model, p, block);
      EXPECT_EQ(choice.algorithm, AlltoallAlgorithm::kBruckZeroCopy) << p << " ranks, " << block << " B";
      EXPECT_NEAR(choice.predictedNs, 5.0 * double(block), 1e-6 * double(block));
    }
  }
  // p = 2: no Bruck form (pairwise's single exchange plus copies), samples or not.
  EXPECT_EQ(selectAlltoall(model, 2, 4096).algorithm, AlltoallAlgorithm::kPairwise);
  // Beyond the timed sizes: the fits, which favour pairwise.
  for (auto [p, block] : {std::pair{4, int64_t{8}}, std::pair{4, int64_t{65536}}}) {
    EXPECT_FALSE(model.sampled(AlltoallAlgorithm::kPairwise, 2, p, block));
    EXPECT_EQ(selectAlltoall(model, p, block).algorithm, AlltoallAlgorithm::kPairwise) << p << ", " << block;
  }
  // Beyond the timed ranks at a timed size: each sample at p = 4 grown by its
  // own fit's ratio (AlltoallCostModel::anchoredNs). Zero-copy Bruck measured
  // half of pairwise at 4 ranks; its fit grows 1.5x to 8 ranks (3 messages
  // against 2), pairwise's 2.1x: Bruck stays, where the bare fits said pairwise.
  {
    EXPECT_FALSE(model.sampled(AlltoallAlgorithm::kPairwise, 2, 8, 4096));
    const AlltoallChoice choice = selectAlltoall(model, 8, 4096);
    EXPECT_EQ(choice.algorithm, AlltoallAlgorithm::kBruckZeroCopy);
    const messaging::CollectiveCost zc{1000, 100000.0, 0.5};  // tuningFavouring's fit for every algorithm but pairwise
    const double at8 = zc.ns(3, 3 * 4 * 4096), at4 = zc.ns(2, 2 * 2 * 4096);
    EXPECT_NEAR(choice.predictedNs, 5.0 * 4096 * at8 / at4, 1e-6 * at8);
  }
  // bruck-radix was timed at kTunedRadix: its samples do not price radix 4.
  EXPECT_TRUE(model.sampled(AlltoallAlgorithm::kBruckRadix, kTunedRadix, 4, 4096));
  EXPECT_FALSE(model.sampled(AlltoallAlgorithm::kBruckRadix, 4, 4, 4096));
  // Where pairwise is sampled, a candidate priced only by its fit does not
  // compete, however cheap the fit: radix 4 at p = 8 once p = 8 was timed.
  Tuning eight = tuningFavouring(AlltoallAlgorithm::kBruckRadix);
  for (messaging::CollectiveFit& fit : eight.collectives) {
    if (fit.name == alltoallFitName(AlltoallAlgorithm::kPairwise)) fit.samples = {{8, 64, 100000.0}};
    if (fit.name == alltoallFitName(AlltoallAlgorithm::kBruckZeroCopy)) fit.samples = {{8, 64, 50000.0}};  // the radix fit: ~2 us
  }
  const AlltoallCostModel timedAtEight = AlltoallCostModel::fromTuning(&eight);
  EXPECT_EQ(selectAlltoall(timedAtEight, 8, 64).algorithm, AlltoallAlgorithm::kBruckZeroCopy);
  EXPECT_EQ(selectAlltoall(timedAtEight, 8, 128).algorithm, AlltoallAlgorithm::kBruckRadix);  // not timed: the fits
  // Deterministic given the file.
  for (int p = 1; p <= 16; ++p) {
    for (int64_t block : {0, 8, 1024, 3000, 16384, 65536}) {
      EXPECT_EQ(selectAlltoall(model, p, block).code(), selectAlltoall(model, p, block).code());
    }
  }
}

// Where pairwise is sampled another algorithm must measure at least
// kSampledMargin below it; between the others the cheapest wins.
TEST(AlltoallSamples, PairwiseKeepsItsPlaceWithinTheMargin) {
  Tuning tuning = tuningFavouring(AlltoallAlgorithm::kPairwise);
  for (AlltoallAlgorithm algorithm : kModelledAlltoalls) {
    addSamples(tuning, algorithm, [](int64_t, int64_t) { return 1000.0; });
  }
  addSamples(tuning, AlltoallAlgorithm::kBruckModified, [](int64_t, int64_t) { return 950.0; });  // 5 % below
  addSamples(tuning, AlltoallAlgorithm::kBruckBasic, [](int64_t, int64_t) { return 960.0; });
  EXPECT_EQ(selectAlltoall(AlltoallCostModel::fromTuning(&tuning), 4, 4096).algorithm, AlltoallAlgorithm::kPairwise);
  addSamples(tuning, AlltoallAlgorithm::kBruckBasic, [](int64_t, int64_t) { return 850.0; });  // 15 % below
  EXPECT_EQ(selectAlltoall(AlltoallCostModel::fromTuning(&tuning), 4, 4096).algorithm,
            AlltoallAlgorithm::kBruckBasic);
}

Tuning sampledTuning() {
  Tuning tuning = tuningFavouring(AlltoallAlgorithm::kPairwise);
  addSamples(tuning, AlltoallAlgorithm::kPairwise, [](int64_t p, int64_t block) { return double(p * block); });
  return tuning;
}

TEST(AlltoallSamplesFile, RoundTripsFormat3AndRefusesBadSamples) {
  const Tuning tuning = sampledTuning();
  const std::string text = messaging::serializeTuning(tuning);
  EXPECT_NE(text.find("\"format_version\": 3"), std::string::npos);
  auto parsed = messaging::parseTuning(text);
  ASSERT_TRUE(parsed.isOk()) << parsed.status().toString();
  size_t samples = 0;
  for (const messaging::CollectiveFit& fit : parsed->collectives) {
    if (fit.name != alltoallFitName(AlltoallAlgorithm::kPairwise)) continue;
    samples = fit.samples.size();
    for (const CollectiveSample& sample : fit.samples) EXPECT_EQ(sample.ns, double(sample.ranks * sample.blockBytes));
  }
  EXPECT_EQ(samples, 9U);
  EXPECT_TRUE(AlltoallCostModel::fromTuning(&*parsed).sampled(AlltoallAlgorithm::kPairwise, 2, 3, 4096));

  // Each hostile sample in place of pairwise's first one.
  auto with = [&](const std::string& sampleJson) {
    nlohmann::json root = nlohmann::json::parse(text);
    nlohmann::json& samplesJson = root["collectives"]["fits"]["alltoall/pairwise"]["samples"];
    samplesJson[0] = nlohmann::json::parse(sampleJson);
    return root.dump(2);
  };
  std::string tooMany = "[";
  for (int i = 0; i < 70; ++i) tooMany += "[3, " + std::to_string(8 * (i + 1)) + ", 1.0], ";
  tooMany += "[2, 1024, 5.0]]";
  for (const std::string& bad : {
           with("[2, 1024, -5.0]"),     // negative time
           with("[2, 1024, 0]"),        // zero time
           with("[0, 1024, 5.0]"),      // no ranks
           with("[2.5, 1024, 5.0]"),    // fractional ranks
           with("[2, -8, 5.0]"),        // negative block
           with("[2, 1024]"),           // too short
           with("[2, 1024, 5.0, 7]"),   // too long
           with("[2, \"1024\", 5.0]"),  // a string
           with("{\"ranks\": 2}"),      // not a triple
           with("[2, 1024, 1e300]"),    // beyond any time
           with("[2, 4096, 5.0]"),      // (2, 4096) twice
       }) {
    auto refused = messaging::parseTuning(bad);
    EXPECT_EQ(refused.status().code(), Code::kInvalidArgument) << bad;
  }
  nlohmann::json crowded = nlohmann::json::parse(text);
  crowded["collectives"]["fits"]["alltoall/pairwise"]["samples"] = nlohmann::json::parse(tooMany);
  EXPECT_EQ(messaging::parseTuning(crowded.dump()).status().code(), Code::kInvalidArgument);  // > kMaxCollectiveSamples
  std::string notArray = text;
  notArray.replace(notArray.find("\"samples\": ["), 12, "\"samples\": 7, \"x\": [");
  EXPECT_EQ(messaging::parseTuning(notArray).status().code(), Code::kInvalidArgument);
  // Truncated anywhere in the samples: not JSON, refused.
  for (size_t cut = text.find("\"samples\""); cut < text.size(); cut += 97) {
    EXPECT_EQ(messaging::parseTuning(text.substr(0, cut)).status().code(), Code::kInvalidArgument) << cut;
  }
}

// Formats 1 and 2 still load: no samples, the fits decide as before; a
// "samples" member in a format 2 file is not read.
TEST(AlltoallSamplesFile, OlderFormatsStillLoad) {
  Tuning fitsOnly = sampledTuning();
  for (messaging::CollectiveFit& fit : fitsOnly.collectives) fit.samples.clear();
  const std::string version2 = messaging::serializeTuning(fitsOnly);
  EXPECT_NE(version2.find("\"format_version\": 2"), std::string::npos);
  auto parsed = messaging::parseTuning(version2);
  ASSERT_TRUE(parsed.isOk()) << parsed.status().toString();
  const AlltoallCostModel model = AlltoallCostModel::fromTuning(&*parsed);
  EXPECT_TRUE(model.fromFile());
  EXPECT_FALSE(model.sampled(AlltoallAlgorithm::kPairwise, 2, 3, 4096));

  std::string version3 = messaging::serializeTuning(sampledTuning());
  version3.replace(version3.find("\"format_version\": 3"), 19, "\"format_version\": 2");
  auto older = messaging::parseTuning(version3);
  ASSERT_TRUE(older.isOk()) << older.status().toString();
  for (const messaging::CollectiveFit& fit : older->collectives) EXPECT_TRUE(fit.samples.empty()) << fit.name;

  Tuning pointToPoint = fitsOnly;
  pointToPoint.collectives.clear();
  const std::string version1 = messaging::serializeTuning(pointToPoint);
  EXPECT_NE(version1.find("\"format_version\": 1"), std::string::npos);
  ASSERT_TRUE(messaging::parseTuning(version1).isOk());
}

}  // namespace
}  // namespace ibdt::collectives
