// The measured cost model (docs/tuning.md): fitting, the tuning file's
// strict parser (the file is untrusted input), host keys, and the decisions
// a file takes, checked with synthetic files whose crossovers are known.
#include "transport/messaging/tuning.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "transport/messaging/tuned_select.h"

namespace ibdt::messaging {
namespace {

HostKey testKey() {
  return HostKey{"Test CPU 9000 @ 1.0GHz", "family 6 model 85 stepping 7", 4, "loopback", "0.0.0-test"};
}

// Per-message ns, per-byte ns, per-block ns.
PathCost costOf(double message, double byte, double block) { return PathCost{true, message, byte, block}; }

// A synthetic machine: pipelined costs 10 us + 1 ns/B, BC-SPUP 30 us +
// 0.5 ns/B, so they cross at 40 000 bytes; RWG-UP is BC-SPUP plus 100 ns
// per block beyond 200 blocks' worth (gathering small blocks costs); Multi-W
// costs 200 ns per block.
Tuning syntheticTuning() {
  Tuning tuning;
  tuning.key = testKey();
  tuning.minBytes = 1000;
  tuning.maxBytes = 1 << 20;
  tuning.cost(TunedPath::kPipelined) = costOf(10'000, 1.0, 0);
  tuning.cost(TunedPath::kPipelinedContig) = costOf(5'000, 0.5, 0);
  tuning.cost(TunedPath::kContig) = costOf(15'000, 0.25, 0);
  tuning.cost(TunedPath::kBcSpup) = costOf(30'000, 0.5, 0);
  tuning.cost(TunedPath::kRwgUp) = costOf(10'000, 0.5, 100);
  tuning.cost(TunedPath::kMultiW) = costOf(5'000, 0.5, 200);
  return tuning;
}

SideLayout strided(int64_t blocks, int64_t blockBytes) {
  return SideLayout{blocks * blockBytes, false, blocks, static_cast<double>(blockBytes)};
}
SideLayout contiguous(int64_t bytes) { return SideLayout{bytes, true, 1, static_cast<double>(bytes)}; }

TEST(TuningFit, RecoversTheTermsOfExactSamples) {
  std::vector<TuningSample> samples;
  for (double bytes : {65536.0, 262144.0, 1048576.0}) {
    for (double blocks : {16.0, 128.0, 1024.0}) samples.push_back({bytes, blocks, 4000 + 0.3 * bytes + 25 * blocks});
  }
  auto cost = fitPathCost(samples, true);
  ASSERT_TRUE(cost.isOk()) << cost.status().toString();
  EXPECT_NEAR(cost->perMessageNs, 4000, 1e-3);
  EXPECT_NEAR(cost->perByteNs, 0.3, 1e-9);
  EXPECT_NEAR(cost->perBlockNs, 25, 1e-6);
  auto noBlocks = fitPathCost({{1000, 0, 1100}, {2000, 0, 1200}, {4000, 0, 1400}}, false);
  ASSERT_TRUE(noBlocks.isOk());
  EXPECT_NEAR(noBlocks->perMessageNs, 1000, 1e-6);
  EXPECT_NEAR(noBlocks->perByteNs, 0.1, 1e-9);
  EXPECT_EQ(noBlocks->perBlockNs, 0);
}

TEST(TuningFit, NeverFitsACostThatFallsWithSize) {
  // Noise made the bigger message faster: the per-byte term is dropped.
  auto cost = fitPathCost({{1000, 0, 2000}, {2000, 0, 1500}, {4000, 0, 1000}}, false);
  ASSERT_TRUE(cost.isOk());
  EXPECT_EQ(cost->perByteNs, 0);
  EXPECT_GT(cost->perMessageNs, 1000);
  EXPECT_LT(cost->perMessageNs, 2000);
  // Per block falling, per byte rising: only the block term goes.
  auto mixed = fitPathCost({{1000, 10, 900}, {1000, 100, 800}, {8000, 10, 4000}, {8000, 100, 3900}}, true);
  ASSERT_TRUE(mixed.isOk());
  EXPECT_EQ(mixed->perBlockNs, 0);
  EXPECT_GT(mixed->perByteNs, 0.3);
}

TEST(TuningFit, RefusesSamplesThatCannotSeparateTheTerms) {
  EXPECT_FALSE(fitPathCost({{1000, 10, 500}}, false).isOk());                                   // too few
  EXPECT_FALSE(fitPathCost({{1000, 10, 500}, {1000, 10, 510}, {1000, 10, 490}}, true).isOk());  // one layout
  EXPECT_FALSE(fitPathCost({{1000, 10, -5}, {2000, 10, 500}}, false).isOk());                   // negative time
}

TEST(TuningFile, RoundTrips) {
  Tuning tuning = syntheticTuning();
  auto parsed = parseTuning(serializeTuning(tuning));
  ASSERT_TRUE(parsed.isOk()) << parsed.status().toString();
  EXPECT_EQ(parsed->key, tuning.key);
  EXPECT_EQ(parsed->minBytes, tuning.minBytes);
  EXPECT_EQ(parsed->maxBytes, tuning.maxBytes);
  for (int p = 0; p < kTunedPathCount; ++p) {
    const PathCost& want = tuning.paths[static_cast<size_t>(p)];
    const PathCost& got = parsed->paths[static_cast<size_t>(p)];
    EXPECT_EQ(got.measured, want.measured) << tunedPathName(static_cast<TunedPath>(p));
    EXPECT_DOUBLE_EQ(got.perMessageNs, want.perMessageNs);
    EXPECT_DOUBLE_EQ(got.perByteNs, want.perByteNs);
    EXPECT_DOUBLE_EQ(got.perBlockNs, want.perBlockNs);
  }
}

// Every hostile input is a clear kInvalidArgument naming the problem.
TEST(TuningFile, RejectsHostileInput) {
  const std::string good = serializeTuning(syntheticTuning());
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    auto at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) text.replace(at, from.size(), to);
    return text;
  };
  struct Case {
    std::string text;
    std::string mentions;
  };
  const Case cases[] = {
      {"", "not valid JSON"},
      {good.substr(0, good.size() / 2), "not valid JSON"},  // truncated
      {"\x01\x02\xff garbage", "not valid JSON"},
      {"[1, 2, 3]", "expected an object"},
      {"{}", "missing \"format\""},
      {replaced("\"ibdt-tune\"", "\"other\""), "not ibdt-tune"},
      {replaced("\"format_version\": 1", "\"format_version\": 7"), "format_version"},
      {replaced("\"cores\": 4", "\"cores\": \"four\""), "\"cores\" must be a number"},
      {replaced("\"cpu_id\": \"family", "\"cpu_id\": [\"family\"], \"x\": \"family"), "\"cpu_id\""},
      {replaced("\"cores\": 4", "\"cores\": -3"), "\"cores\""},
      {replaced("\"per_byte_ns\": 1.0", "\"per_byte_ns\": 1e300"), "per_byte_ns"},
      {replaced("\"per_message_ns\": 10000.0", "\"per_message_ns\": null"), "per_message_ns"},
      {replaced("\"pipelined\":", "\"warp-drive\":"), "unknown path"},
      {replaced("\"bytes_measured\": [", "\"bytes_measured\": [99999999,"), "bytes_measured"},
      // Beyond 256 KiB (a file with its alltoall samples at 2..8 ranks: ~40 KiB).
      {std::string(270000, ' ') + good, "more than a tuning file holds"},
      {std::string(30000, '[') + std::string(30000, ']'), "expected an object"},  // deep nesting
      {std::string(130000, '[') + std::string(130000, ']'), "expected an object"},  // as deep as the limit allows
  };
  for (const Case& c : cases) {
    auto parsed = parseTuning(c.text);
    ASSERT_FALSE(parsed.isOk()) << c.mentions;
    EXPECT_EQ(parsed.status().code(), Code::kInvalidArgument);
    EXPECT_NE(parsed.status().toString().find(c.mentions), std::string::npos) << parsed.status().toString();
  }
}

class TuneFileOnDisk : public ::testing::Test {
 protected:
  void SetUp() override { path_ = ::testing::TempDir() + "ibdt-tune-test-" + std::to_string(getpid()) + ".json"; }
  void TearDown() override { std::remove(path_.c_str()); }
  void write(const std::string& text) { std::ofstream(path_, std::ios::binary | std::ios::trunc) << text; }
  std::string path_;
};

TEST_F(TuneFileOnDisk, LoadsAFileForThisHost) {
  ASSERT_TRUE(writeTuningFile(path_, syntheticTuning()).isOk());
  LoadedTuning loaded = loadTuning(path_, testKey());
  ASSERT_TRUE(loaded.tuning.has_value()) << loaded.note;
  EXPECT_EQ(loaded.path, path_);
  EXPECT_NE(loaded.note.find("in force"), std::string::npos);
}

TEST_F(TuneFileOnDisk, IgnoresAFileMadeElsewhere) {
  ASSERT_TRUE(writeTuningFile(path_, syntheticTuning()).isOk());
  for (HostKey other : {testKey(), testKey(), testKey(), testKey(), testKey()}) {
    static int field = 0;
    switch (field++) {
      case 0:
        other.cpuModel = "AMD EPYC 7B13 64-Core Processor";
        break;
      case 4:
        other.cpuId = "family 6 model 143 stepping 8";  // same name, another generation
        break;
      case 1:
        other.cores = 128;
        break;
      case 2:
        other.provider = "verbs";
        break;
      default:
        other.version = "9.9.9";
        break;
    }
    LoadedTuning loaded = loadTuning(path_, other);
    EXPECT_FALSE(loaded.tuning.has_value());
    EXPECT_NE(loaded.note.find("made for"), std::string::npos) << loaded.note;
  }
}

// A file from before the CPU's generation was recorded may come from another
// CPU that shows the same model name (a VM's bare "AMD EPYC"): not used.
TEST_F(TuneFileOnDisk, IgnoresAFileThatDoesNotNameTheCpuGeneration) {
  std::string text = serializeTuning(syntheticTuning());
  const std::string field = "\"cpu_id\": \"" + testKey().cpuId + "\",";
  auto at = text.find(field);
  ASSERT_NE(at, std::string::npos) << text.substr(0, 300);
  write(text.erase(at, field.size()));
  ASSERT_TRUE(parseTuning(text).isOk());
  LoadedTuning loaded = loadTuning(path_, testKey());
  EXPECT_FALSE(loaded.tuning.has_value());
  EXPECT_NE(loaded.note.find("generation not recorded"), std::string::npos) << loaded.note;
}

TEST_F(TuneFileOnDisk, IgnoresBadAndMissingFilesAndOff) {
  write("{\"format\": \"ibdt-tune\", \"format_vers");  // truncated
  LoadedTuning bad = loadTuning(path_, testKey());
  EXPECT_FALSE(bad.tuning.has_value());
  EXPECT_NE(bad.note.find("not valid JSON"), std::string::npos) << bad.note;
  std::remove(path_.c_str());
  LoadedTuning missing = loadTuning(path_, testKey());
  EXPECT_FALSE(missing.tuning.has_value());
  EXPECT_NE(missing.note.find("built-in defaults"), std::string::npos);
  EXPECT_FALSE(loadTuning(kTuneFileOff, testKey()).tuning.has_value());
  EXPECT_FALSE(loadTuning(::testing::TempDir(), testKey()).tuning.has_value());  // a directory
}

TEST(TuningHostKey, DefaultPathIsPerHostAndFileNameSafe) {
  HostKey key = testKey();
  std::string stem = key.fileStem();
  EXPECT_EQ(stem.find('/'), std::string::npos);
  EXPECT_EQ(stem.find(' '), std::string::npos);
  EXPECT_NE(stem.find("4c-loopback"), std::string::npos) << stem;
  HostKey other = key;
  other.cpuModel = "AMD EPYC 7B13";
  EXPECT_NE(defaultTuneFilePath(other), defaultTuneFilePath(key));
  HostKey sameName = key;
  sameName.cpuId = "family 6 model 143 stepping 8";
  EXPECT_NE(defaultTuneFilePath(sameName), defaultTuneFilePath(key));
  HostKey here = currentHostKey("shm");
  EXPECT_GE(here.cores, 1);
  EXPECT_FALSE(here.cpuModel.empty());
  EXPECT_FALSE(here.cpuId.empty());
  EXPECT_EQ(here.provider, "shm");
}

TEST(TunedSelect, PipelinedGivesWayToRendezvousAtTheFittedCrossover) {
  Tuning tuning = syntheticTuning();
  // 300 blocks: BC-SPUP (30 us + 0.5 ns/B) is the cheapest rendezvous
  // (RWG-UP adds 30 us of blocks, Multi-W 60 us); against pipelined (10 us
  // + 1 ns/B) it crosses at 40 000 B.
  EXPECT_TRUE(tunedPrefersPipelined(tuning, strided(300, 130), false));   // 39 000 B
  EXPECT_FALSE(tunedPrefersPipelined(tuning, strided(300, 137), false));  // 41 100 B
  EXPECT_EQ(bestTunedPath(tuning, strided(300, 137), strided(300, 137), false, true), TunedPath::kBcSpup);
  // 100 blocks: RWG-UP (20 us + 0.5 ns/B) wins, crossing pipelined at 20 000 B.
  EXPECT_TRUE(tunedPrefersPipelined(tuning, strided(100, 190), false));
  EXPECT_EQ(bestTunedPath(tuning, strided(100, 210), strided(100, 210), false, true), TunedPath::kRwgUp);
  // Contiguous: pipelined 5 us + 0.5 ns/B vs one write 15 us + 0.25 ns/B cross at 40 000 B.
  EXPECT_TRUE(tunedPrefersPipelined(tuning, contiguous(39'000), false));
  EXPECT_FALSE(tunedPrefersPipelined(tuning, contiguous(41'000), false));
}

TEST(TunedSelect, PackAndUnpackFollowTheBlockCosts) {
  Tuning tuning = syntheticTuning();
  // RWG-UP beats BC-SPUP below 200 blocks (100 ns per block vs 20 us).
  EXPECT_FALSE(tunedWantsPack(tuning, strided(199, 512)));
  EXPECT_TRUE(tunedWantsPack(tuning, strided(201, 512)));
  EXPECT_FALSE(tunedWantsPack(tuning, contiguous(1 << 20)));
  // Multi-W (5 us + 200 ns/block) vs RWG-UP (10 us + 100 ns/block): 50 blocks.
  EXPECT_FALSE(tunedReceiverUnpacks(tuning, strided(49, 4096), false, strided(49, 4096), false));
  EXPECT_TRUE(tunedReceiverUnpacks(tuning, strided(51, 4096), false, strided(51, 4096), false));
  // The receiver charges the larger block count of the two sides.
  EXPECT_TRUE(tunedReceiverUnpacks(tuning, strided(10, 4096), false, strided(400, 100), false));
}

TEST(TunedSelect, UnmeasuredPathsAreNeverChosen) {
  Tuning tuning = syntheticTuning();
  tuning.cost(TunedPath::kPipelined) = PathCost{};
  EXPECT_FALSE(tunedPrefersPipelined(tuning, strided(10, 4000), false));
  // P-RRS is measured nowhere here: a contiguous sender with RDMA read gets RWG-UP.
  EXPECT_EQ(bestTunedPath(tuning, contiguous(1 << 20), strided(256, 4096), true, false), TunedPath::kRwgUp);
  tuning.cost(TunedPath::kPRrs) = costOf(1, 0.01, 0);
  EXPECT_EQ(bestTunedPath(tuning, contiguous(1 << 20), strided(256, 4096), true, false), TunedPath::kPRrs);
  EXPECT_EQ(bestTunedPath(tuning, contiguous(1 << 20), strided(256, 4096), false, false), TunedPath::kRwgUp);
}

TEST(TunedSelect, GenericCompetesForStridedSendersOnly) {
  Tuning tuning = syntheticTuning();
  // No "generic" fit (a file from before it was timed): never chosen.
  EXPECT_FALSE(tunedPrefersGeneric(tuning, strided(300, 500), false));
  // Generic 8 us + 0.4 ns/B: below every rendezvous scheme at 300 blocks
  // (BC-SPUP 30 us + 0.5 ns/B), and below pipelined (10 us + 1 ns/B) from 0 B.
  tuning.cost(TunedPath::kGeneric) = costOf(8'000, 0.4, 0);
  EXPECT_TRUE(tunedPrefersGeneric(tuning, strided(300, 500), false));
  EXPECT_EQ(bestTunedPath(tuning, strided(300, 500), strided(300, 500), false, true), TunedPath::kGeneric);
  EXPECT_FALSE(tunedPrefersPipelined(tuning, strided(300, 500), false));
  // Pipelined cheaper than Generic still goes pipelined (the sender's first choice).
  tuning.cost(TunedPath::kPipelined) = costOf(1'000, 0.1, 0);
  EXPECT_TRUE(tunedPrefersPipelined(tuning, strided(300, 500), false));
  // A contiguous sender has nothing to pack: never Generic.
  EXPECT_NE(bestTunedPath(tuning, contiguous(1 << 20), strided(256, 4096), false, false), TunedPath::kGeneric);
  EXPECT_FALSE(tunedPrefersGeneric(tuning, contiguous(1 << 20), false));
  // Its per-block term counts: 101 ns per block against RWG-UP's 100, else equal.
  tuning.cost(TunedPath::kGeneric) = costOf(10'000, 0.5, 101);
  EXPECT_FALSE(tunedPrefersGeneric(tuning, strided(100, 1000), false));
  // The file carries the fit.
  auto reparsed = parseTuning(serializeTuning(tuning));
  ASSERT_TRUE(reparsed.isOk()) << reparsed.status().toString();
  EXPECT_TRUE(reparsed->cost(TunedPath::kGeneric).measured);
  EXPECT_EQ(reparsed->cost(TunedPath::kGeneric).perBlockNs, 101);
}

TEST(TunedSelect, DecisionsAreDeterministicGivenAFile) {
  auto reparsed = parseTuning(serializeTuning(syntheticTuning()));
  ASSERT_TRUE(reparsed.isOk());
  Tuning original = syntheticTuning();
  for (int64_t blocks : {1, 7, 128, 1000}) {
    for (int64_t blockBytes : {8, 300, 4096, 65536}) {
      SideLayout side = strided(blocks, blockBytes);
      for (int repeat = 0; repeat < 3; ++repeat) {
        EXPECT_EQ(bestTunedPath(original, side, side, true, true), bestTunedPath(*reparsed, side, side, true, true));
        EXPECT_EQ(tunedWantsPack(original, side), tunedWantsPack(*reparsed, side));
      }
    }
  }
}

}  // namespace
}  // namespace ibdt::messaging
