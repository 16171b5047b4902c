// kAuto's selection (docs/alltoall-selection.md, collectives/alltoall_select.h):
// the α-β volumes per algorithm, a deterministic choice, direct-write in
// collective inits, alltoallv's choice from its agreement, the tuning file's
// collective fits (format_version 2) parsed strictly and followed by every
// rank of a Context that loads the file, with every received byte checked.
#include "collectives/alltoall_select.h"
#include "collectives/alltoall_shared_memory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "collectives/alltoall_data.h"
#include "collectives/alltoallv_select.h"
#include "ibdt/collectives.h"
#include "support/thread_ranks.h"
#include "collectives/tuning_favouring.h"

namespace ibdt::collectives {
namespace {

using messaging::CollectiveCost;
using messaging::Tuning;
using messaging::testing::RankEnv;
using messaging::testing::runRanks;
using testing::AlltoallBuffers;
using testing::Side;
using testing::tuningFavouring;

TEST(AlltoallVolume, PairwiseAndBruckSchedules) {
  AlltoallVolume pairwise = alltoallVolume(AlltoallAlgorithm::kPairwise, 2, 8, 10);
  EXPECT_EQ(pairwise.messages, 7);
  EXPECT_EQ(pairwise.bytes, 70);
  // Radix 2, p = 8: 3 rounds of 4 blocks.
  AlltoallVolume bruck = alltoallVolume(AlltoallAlgorithm::kBruckZeroCopy, 4, 8, 10);
  EXPECT_EQ(bruck.messages, 3);
  EXPECT_EQ(bruck.bytes, 120);
  // Radix 4, p = 8: digit 0 values 1..3 (2 blocks each), digit 1 value 1 (4 blocks).
  AlltoallVolume radix = alltoallVolume(AlltoallAlgorithm::kBruckRadix, 4, 8, 10);
  EXPECT_EQ(radix.messages, 4);
  EXPECT_EQ(radix.bytes, 100);
  // p = 5, radix 2: rounds of 2, 2 and 1 blocks (indices with bit k set).
  AlltoallVolume odd = alltoallVolume(AlltoallAlgorithm::kBruckModified, 2, 5, 1);
  EXPECT_EQ(odd.messages, 3);
  EXPECT_EQ(odd.bytes, 5);
  EXPECT_EQ(alltoallVolume(AlltoallAlgorithm::kPairwise, 2, 1, 100).messages, 0);
}


TEST(AlltoallSelection, DeterministicAndFollowsTheModel) {
  const AlltoallCostModel builtIn = AlltoallCostModel::builtIn();
  EXPECT_FALSE(builtIn.fromFile());
  for (int p : {1, 2, 3, 8, 64, 1024}) {
    for (int64_t bytes : {0, 1, 64, 4096, 1 << 20}) {
      AlltoallChoice first = selectAlltoall(builtIn, p, bytes), second = selectAlltoall(builtIn, p, bytes);
      EXPECT_EQ(first.code(), second.code()) << p << " ranks, " << bytes << " B";
      EXPECT_EQ(AlltoallChoice::fromCode(first.code()).code(), first.code());
      if (p == 1 || bytes == 0) {
        EXPECT_EQ(first.algorithm, AlltoallAlgorithm::kPairwise);
      }
      // At p = 2 every Bruck form is pairwise's exchange plus copies.
      if (p == 2) {
        EXPECT_TRUE(first.algorithm == AlltoallAlgorithm::kPairwise ||
                    first.algorithm == AlltoallAlgorithm::kDirectWrite ||
                    first.algorithm == AlltoallAlgorithm::kSharedMemory);
      }
      if (p <= 2) {
        EXPECT_EQ(selectAlltoall(builtIn, p, bytes, false).algorithm, AlltoallAlgorithm::kPairwise);
      }
    }
  }
  // The built-in model: Bruck's log p messages win for small blocks at many
  // ranks, pairwise's smaller volume for large blocks.
  EXPECT_NE(selectAlltoall(builtIn, 64, 8).algorithm, AlltoallAlgorithm::kPairwise);
  EXPECT_EQ(selectAlltoall(builtIn, 64, 1 << 20, false).algorithm, AlltoallAlgorithm::kPairwise);

  for (AlltoallAlgorithm cheap : kModelledAlltoalls) {
    Tuning tuning = tuningFavouring(cheap);
    AlltoallCostModel model = AlltoallCostModel::fromTuning(&tuning);
    EXPECT_TRUE(model.fromFile());
    // The hierarchical alltoall competes on several nodes only.
    const int nodes = cheap == AlltoallAlgorithm::kHierarchical ? 2 : 1;
    EXPECT_EQ(selectAlltoall(model, 16, 64, true, nodes).algorithm, cheap) << alltoallAlgorithmName(cheap);
  }
  // A file without a pairwise fit is not a collective model: built-in.
  Tuning partial = tuningFavouring(AlltoallAlgorithm::kBruckBasic);
  partial.collectives.erase(partial.collectives.begin());
  EXPECT_FALSE(AlltoallCostModel::fromTuning(&partial).fromFile());
  EXPECT_FALSE(AlltoallCostModel::fromTuning(nullptr).fromFile());
}

// Direct-write (docs/alltoall-direct-writes.md): a candidate only in a
// collective init; the built-in model picks it for large blocks (from
// ~16-23 KiB) when the ranks are on different nodes (p nodes here: no
// shared segment, no hierarchy), never for small ones; on one node from
// ~350 KiB (below, the shared-memory alltoall); a file without its fit
// leaves it out.
TEST(AlltoallSelection, DirectWriteForLargeBlocksInCollectiveInits) {
  const AlltoallCostModel builtIn = AlltoallCostModel::builtIn();
  for (int p : {2, 3, 4, 8, 64, 1024}) {
    for (int64_t bytes : {int64_t{65536}, int64_t{1} << 20}) {
      EXPECT_EQ(selectAlltoall(builtIn, p, bytes, true, p).algorithm, AlltoallAlgorithm::kDirectWrite)
          << p << ", " << bytes;
      EXPECT_NE(selectAlltoall(builtIn, p, bytes, false, p).algorithm, AlltoallAlgorithm::kDirectWrite);
    }
    EXPECT_EQ(selectAlltoall(builtIn, p, int64_t{1} << 20).algorithm, AlltoallAlgorithm::kDirectWrite) << p;
    for (int64_t bytes : {1, 64, 4096}) {
      EXPECT_NE(selectAlltoall(builtIn, p, bytes, true, p).algorithm, AlltoallAlgorithm::kDirectWrite)
          << p << ", " << bytes;
    }
  }
  Tuning tuning = tuningFavouring(AlltoallAlgorithm::kPairwise);
  EXPECT_EQ(selectAlltoall(AlltoallCostModel::fromTuning(&tuning), 4, 1 << 20).algorithm, AlltoallAlgorithm::kPairwise);
  for (messaging::CollectiveFit& fit : tuning.collectives) {
    if (fit.name == alltoallFitName(AlltoallAlgorithm::kDirectWrite)) fit.cost = CollectiveCost{1000, 5.0, 0.1};
  }
  EXPECT_EQ(selectAlltoall(AlltoallCostModel::fromTuning(&tuning), 4, 64).algorithm, AlltoallAlgorithm::kDirectWrite);
  // Without its fit it is not a candidate.
  std::erase_if(tuning.collectives, [](const messaging::CollectiveFit& fit) {
    return fit.name == alltoallFitName(AlltoallAlgorithm::kDirectWrite);
  });
  EXPECT_EQ(selectAlltoall(AlltoallCostModel::fromTuning(&tuning), 4, 1 << 20).algorithm, AlltoallAlgorithm::kPairwise);
}

// The shared-memory alltoall (docs/alltoall-shared-memory.md): on one node,
// in a collective init, the built-in model picks it for small and mid-size
// blocks; never across nodes, never under a pinned tag (a local init), never
// per call without a measured init, never when its segment would exceed
// kAutoSharedMemoryMaxBytes; a file that timed it prices it by its samples.
TEST(AlltoallSelection, SharedMemoryOnOneNodeInCollectiveInits) {
  const AlltoallCostModel builtIn = AlltoallCostModel::builtIn();
  for (int p : {2, 3, 8, 64}) {
    for (int64_t bytes : {int64_t{1}, int64_t{64}, int64_t{4096}, int64_t{65536}}) {
      if (sharedMemoryAlltoallBytes(p, bytes) > kAutoSharedMemoryMaxBytes) {
        EXPECT_NE(selectAlltoall(builtIn, p, bytes).algorithm, AlltoallAlgorithm::kSharedMemory) << p << ", " << bytes;
        continue;
      }
      EXPECT_EQ(selectAlltoall(builtIn, p, bytes).algorithm, AlltoallAlgorithm::kSharedMemory) << p << ", " << bytes;
      EXPECT_NE(selectAlltoall(builtIn, p, bytes, false).algorithm, AlltoallAlgorithm::kSharedMemory);
      EXPECT_NE(selectAlltoall(builtIn, p, bytes, true, 2).algorithm, AlltoallAlgorithm::kSharedMemory);
      EXPECT_NE(selectAlltoall(builtIn, p, bytes, true, 1, /*perCall=*/true).algorithm,
                AlltoallAlgorithm::kSharedMemory);
    }
  }
  EXPECT_NE(selectAlltoall(builtIn, 1024, 65536).algorithm, AlltoallAlgorithm::kSharedMemory);  // 128 GiB
  // In place too (its row is packed before the buffer is overwritten).
  EXPECT_EQ(selectAlltoall(builtIn, 8, 64, true, 1, false, true).algorithm, AlltoallAlgorithm::kSharedMemory);
  // Samples in a file price it where they were timed (p = 4 here: measured slower than pairwise).
  Tuning tuning = tuningFavouring(AlltoallAlgorithm::kPairwise);
  for (messaging::CollectiveFit& fit : tuning.collectives) {
    if (fit.name == alltoallFitName(AlltoallAlgorithm::kPairwise)) fit.samples = {{4, 64, 1000}};
    if (fit.name == alltoallFitName(AlltoallAlgorithm::kSharedMemory)) fit.samples = {{4, 64, 2000}};
  }
  EXPECT_EQ(selectAlltoall(AlltoallCostModel::fromTuning(&tuning), 4, 64).algorithm, AlltoallAlgorithm::kPairwise);
}

// The blocking call builds a plan per call, so its choice prices each
// candidate's init as well: direct-write (whose init exchanges keys) only
// where the file measured that init, and then only if run + init is
// cheapest; a persistent init ignores the init terms; a build under a pinned
// tag (collectiveInit false) never takes direct-write.
TEST(AlltoallSelection, PerCallPricesTheMeasuredInit) {
  Tuning tuning = tuningFavouring(AlltoallAlgorithm::kDirectWrite);
  auto choose = [&](bool perCall, bool collectiveInit = true) {
    return selectAlltoall(AlltoallCostModel::fromTuning(&tuning), 4, 4096, collectiveInit, 1, perCall).algorithm;
  };
  EXPECT_FALSE(AlltoallCostModel::fromTuning(&tuning).hasInit(AlltoallAlgorithm::kDirectWrite));
  EXPECT_EQ(choose(false), AlltoallAlgorithm::kDirectWrite);
  EXPECT_NE(choose(true), AlltoallAlgorithm::kDirectWrite);  // no measured init
  tuning.collectives.push_back({alltoallInitFitName(AlltoallAlgorithm::kDirectWrite), CollectiveCost{500, 20, 0}});
  const AlltoallCostModel cheapInit = AlltoallCostModel::fromTuning(&tuning);
  ASSERT_TRUE(cheapInit.hasInit(AlltoallAlgorithm::kDirectWrite));
  EXPECT_EQ(cheapInit.predictInitNs(AlltoallAlgorithm::kDirectWrite, 2, 4, 4096), 500 + 20 * 3);
  EXPECT_EQ(cheapInit.predictInitNs(AlltoallAlgorithm::kPairwise, 2, 4, 4096), 0);
  EXPECT_EQ(choose(true), AlltoallAlgorithm::kDirectWrite);
  EXPECT_NE(choose(true, false), AlltoallAlgorithm::kDirectWrite);
  // An init dearer than the other candidates' runs: per call they win, persistent it still does.
  tuning.collectives.back().cost = CollectiveCost{1e9, 0, 0};
  EXPECT_NE(choose(true), AlltoallAlgorithm::kDirectWrite);
  EXPECT_EQ(choose(false), AlltoallAlgorithm::kDirectWrite);
  // A local init is priced too: pairwise's costly init hands the call to the next cheapest run.
  Tuning bruck = tuningFavouring(AlltoallAlgorithm::kPairwise);
  for (messaging::CollectiveFit& fit : bruck.collectives) {
    if (fit.name == alltoallFitName(AlltoallAlgorithm::kBruckModified)) fit.cost.perMessageNs = 20;
  }
  bruck.collectives.push_back({alltoallInitFitName(AlltoallAlgorithm::kPairwise), CollectiveCost{1e6, 0, 0}});
  const AlltoallCostModel model = AlltoallCostModel::fromTuning(&bruck);
  EXPECT_EQ(selectAlltoall(model, 4, 8, true, 1, false).algorithm, AlltoallAlgorithm::kPairwise);
  EXPECT_EQ(selectAlltoall(model, 4, 8, true, 1, true).algorithm, AlltoallAlgorithm::kBruckModified);
}

// Across nodes a round costs one network latency however many of its
// messages overlap, so the model's choice is ibdt-sim's (docs/simulator.md,
// fat tree of 16-rank nodes): radix-8 Bruck for small blocks at 64, 256 and
// 1024 ranks, where the per-message pricing alone chose zero-copy Bruck
// (1.5-1.8x slower there); pairwise for 4 KiB at 64 and 256 ranks; on one
// node (no network rounds) the choice is as before.
TEST(AlltoallSelection, AcrossNodesRoundsOverlapAsInTheSimulator) {
  const AlltoallCostModel builtIn = AlltoallCostModel::builtIn();
  for (int p : {64, 256, 1024}) {
    for (int64_t bytes : {8, 64}) {
      const AlltoallChoice choice = selectAlltoall(builtIn, p, bytes, false, p / 16);
      EXPECT_EQ(choice.algorithm, AlltoallAlgorithm::kBruckRadix) << p << " ranks, " << bytes << " B";
      EXPECT_EQ(choice.radix, 8) << p << " ranks, " << bytes << " B";
    }
    // One node: per-message pricing alone, zero-copy Bruck for 8 B (as before).
    EXPECT_EQ(selectAlltoall(builtIn, p, 8, false, 1).algorithm, AlltoallAlgorithm::kBruckZeroCopy) << p;
  }
  EXPECT_EQ(selectAlltoall(builtIn, 64, 4096, false, 4).algorithm, AlltoallAlgorithm::kPairwise);
  EXPECT_EQ(selectAlltoall(builtIn, 256, 4096, false, 16).algorithm, AlltoallAlgorithm::kPairwise);
  // The rounds: pairwise's windows of 8, Bruck's ceil(log_r p).
  EXPECT_EQ(alltoallVolume(AlltoallAlgorithm::kPairwise, 2, 64, 8).rounds, 8);
  EXPECT_EQ(alltoallVolume(AlltoallAlgorithm::kBruckZeroCopy, 2, 1024, 8).rounds, 10);
  EXPECT_EQ(alltoallVolume(AlltoallAlgorithm::kBruckRadix, 8, 1024, 8).rounds, 4);
  EXPECT_EQ(alltoallVolume(AlltoallAlgorithm::kDirectWrite, 2, 64, 8).rounds, 1);
  // Without the network term (a latency of 0) the old, per-message answer.
  AlltoallCostModel flat = builtIn;
  flat.setNetworkRoundNs(0);
  EXPECT_EQ(selectAlltoall(flat, 1024, 8, false, 64).algorithm, AlltoallAlgorithm::kBruckZeroCopy);
}

// The hierarchical alltoall's leaders: Bruck where many nodes trade small
// node-blocks (log2 N network rounds instead of (N - 1) / 8 windows),
// direct for large node-blocks and few nodes.
TEST(AlltoallSelection, LeaderExchangeBruckForSmallNodeBlocksOnManyNodes) {
  const AlltoallCostModel builtIn = AlltoallCostModel::builtIn();
  EXPECT_EQ(selectLeaderExchange(builtIn, 64, 64), LeaderExchange::kBruck);
  EXPECT_EQ(selectLeaderExchange(builtIn, 256, 512), LeaderExchange::kBruck);
  EXPECT_EQ(selectLeaderExchange(builtIn, 64, 64 * 1024), LeaderExchange::kDirect);
  EXPECT_EQ(selectLeaderExchange(builtIn, 4, 8), LeaderExchange::kDirect);
  EXPECT_EQ(selectLeaderExchange(builtIn, 2, 8), LeaderExchange::kDirect);
  EXPECT_EQ(selectLeaderExchange(builtIn, 1, 8), LeaderExchange::kDirect);
  AlltoallCostModel noBruck;  // a tuning file without zero-copy Bruck
  noBruck.set(AlltoallAlgorithm::kPairwise, {500, 1000, 0.35});
  EXPECT_EQ(selectLeaderExchange(noBruck, 64, 64), LeaderExchange::kDirect);
}

// alltoallv (docs/alltoallv.md, "Automatic choice"): pairwise priced at the
// busiest rank's mean block, zero-copy Bruck at the largest block (so a
// very irregular problem does not choose it), direct-write and (one node)
// shared-memory at the mean.
TEST(AlltoallvSelection, TheAgreementDecides) {
  const AlltoallCostModel builtIn = AlltoallCostModel::builtIn();
  constexpr int kTwoNodes = 2;  // the message algorithms; one node's shared segment last
  AlltoallCostModel noSegment = builtIn;  // a tuning in which the segment never wins
  noSegment.set(AlltoallAlgorithm::kSharedMemory, {1e12, 1e12, 1e6});
  auto regular = [](int p, int64_t block) {
    AlltoallvAgreement agreed;
    agreed.minBlockBytes = agreed.maxBlockBytes = block;
    agreed.maxRankBytes = block * (p - 1);
    agreed.kind = datatype::BasicKind::kByte;
    agreed.dense = true;
    return agreed;
  };
  EXPECT_EQ(selectAlltoallv(noSegment, 8, regular(8, 16)).algorithm, AlltoallvAlgorithm::kBruckZeroCopy);
  EXPECT_EQ(selectAlltoallv(builtIn, 8, regular(8, 65536), kTwoNodes).algorithm, AlltoallvAlgorithm::kDirectWrite);
  EXPECT_EQ(selectAlltoallv(builtIn, 2, regular(2, 65536), kTwoNodes).algorithm, AlltoallvAlgorithm::kDirectWrite);
  // Not too irregular: one 20 KB block among 100-byte ones keeps pairwise.
  AlltoallvAgreement skewed = regular(8, 100);
  skewed.maxBlockBytes = 20000;
  skewed.minBlockBytes = 0;
  skewed.maxRankBytes = 20600;
  EXPECT_EQ(selectAlltoallv(builtIn, 8, skewed, kTwoNodes).algorithm, AlltoallvAlgorithm::kPairwise);
  // Without one kind on every rank no Bruck; without dense types no direct-write.
  AlltoallvAgreement mixed = regular(8, 16);
  mixed.kind.reset();
  EXPECT_EQ(selectAlltoallv(builtIn, 8, mixed, kTwoNodes).algorithm, AlltoallvAlgorithm::kPairwise);
  AlltoallvAgreement strided = regular(8, 65536);
  strided.dense = false;
  EXPECT_EQ(selectAlltoallv(builtIn, 8, strided, kTwoNodes).algorithm, AlltoallvAlgorithm::kPairwise);
  // Nothing to move, one rank, or Bruck at p = 2: pairwise.
  EXPECT_EQ(selectAlltoallv(builtIn, 8, regular(8, 0), kTwoNodes).algorithm, AlltoallvAlgorithm::kPairwise);
  EXPECT_EQ(selectAlltoallv(builtIn, 1, regular(1, 0), kTwoNodes).algorithm, AlltoallvAlgorithm::kPairwise);
  EXPECT_EQ(selectAlltoallv(builtIn, 2, regular(2, 1), kTwoNodes).algorithm, AlltoallvAlgorithm::kPairwise);
  // On one node the built-in model prices the shared segment below every
  // message algorithm, for any types and irregularity; not where its
  // segment would pass the auto cap, nor with nothing to move.
  for (const AlltoallvAgreement& agreed : {regular(8, 16), regular(8, 65536), skewed, mixed, strided}) {
    EXPECT_EQ(selectAlltoallv(builtIn, 8, agreed, 1).algorithm, AlltoallvAlgorithm::kSharedMemory);
  }
  EXPECT_EQ(selectAlltoallv(builtIn, 2, regular(2, 1), 1).algorithm, AlltoallvAlgorithm::kSharedMemory);
  AlltoallvAgreement huge = strided;
  huge.maxRankBytes = kAutoSharedMemoryMaxBytes / 8;
  EXPECT_NE(selectAlltoallv(builtIn, 8, huge, 1).algorithm, AlltoallvAlgorithm::kSharedMemory);
  EXPECT_EQ(selectAlltoallv(builtIn, 8, regular(8, 0), 1).algorithm, AlltoallvAlgorithm::kPairwise);
  // A scratch bound (AlltoallvOptions::scratchBytes) leaves out the segment
  // where its share (64 B + 2 x the busiest rank's bytes, rounded to lines)
  // passes it, and Bruck where p - 1 of its largest blocks would.
  AlltoallvAgreement bounded = regular(8, 65536);  // share 64 + 2 x 458752 B
  bounded.scratchBound = 256 << 10;
  EXPECT_EQ(selectAlltoallv(builtIn, 8, bounded, 1).algorithm, AlltoallvAlgorithm::kDirectWrite);
  bounded.scratchBound = 64 + 2 * 458752;
  EXPECT_EQ(selectAlltoallv(builtIn, 8, bounded, 1).algorithm, AlltoallvAlgorithm::kSharedMemory);
  bounded.scratchBound = 64 + 2 * 458752 - 1;
  EXPECT_NE(selectAlltoallv(builtIn, 8, bounded, 1).algorithm, AlltoallvAlgorithm::kSharedMemory);
  AlltoallvAgreement smallBlocks = regular(8, 16);
  smallBlocks.scratchBound = 7 * 16 - 1;
  EXPECT_NE(selectAlltoallv(noSegment, 8, smallBlocks).algorithm, AlltoallvAlgorithm::kBruckZeroCopy);
  smallBlocks.scratchBound = 7 * 16;
  EXPECT_EQ(selectAlltoallv(noSegment, 8, smallBlocks).algorithm, AlltoallvAlgorithm::kBruckZeroCopy);
}

TEST(AlltoallSelectionFile, RoundTripsAndRefusesBadCollectiveFits) {
  Tuning tuning = tuningFavouring(AlltoallAlgorithm::kBruckRadix);
  std::string text = messaging::serializeTuning(tuning);
  EXPECT_NE(text.find("\"format_version\": 2"), std::string::npos);
  auto parsed = messaging::parseTuning(text);
  ASSERT_TRUE(parsed.isOk()) << parsed.status().toString();
  ASSERT_EQ(parsed->collectives.size(), tuning.collectives.size());
  int found = 0;
  for (const messaging::CollectiveFit& fit : parsed->collectives) {
    if (fit.name != "alltoall/bruck-radix") continue;
    ++found;
    EXPECT_EQ(fit.cost.perMessageNs, 10.0);
    EXPECT_EQ(fit.cost.fixedNs, 1000.0);
    EXPECT_EQ(fit.cost.perByteNs, 0.5);
  }
  EXPECT_EQ(found, 1);
  EXPECT_EQ(parsed->collectiveMaxRanks, 4);
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string changed = text;
    size_t at = changed.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) changed.replace(at, from.size(), to);
    return changed;
  };
  for (const std::string& bad :
       {replaced("alltoall/pairwise", "alltoall/Pair wise"),
        replaced("\"per_message_ns\": 10.0", "\"per_message_ns\": -10.0"),
        replaced("\"ranks_measured\": [", "\"ranks_measured\": [9, "), replaced("\"fits\": {", "\"fits\": 3, \"x\": {"),
        replaced("\"collectives\"", "\"collective\"")}) {
    auto refused = messaging::parseTuning(bad);
    EXPECT_EQ(refused.status().code(), Code::kInvalidArgument) << bad;
  }
  // A version 1 file (no collectives) still parses.
  Tuning pointToPoint = tuning;
  pointToPoint.collectives.clear();
  auto old = messaging::parseTuning(messaging::serializeTuning(pointToPoint));
  ASSERT_TRUE(old.isOk()) << old.status().toString();
  EXPECT_TRUE(old->collectives.empty());
}

// Every rank of a Context that loaded the file runs the file's choice, and
// every received byte is right; on two simulated nodes the ranks agree in
// an allreduce first.
TEST(AlltoallSelectionThreads, EveryRankFollowsTheFile) {
  const std::string path = ::testing::TempDir() + "ibdt-alltoall-select-" + std::to_string(getpid()) + ".json";
  for (AlltoallAlgorithm cheap : {AlltoallAlgorithm::kBruckZeroCopy, AlltoallAlgorithm::kBruckRadix}) {
    ASSERT_TRUE(messaging::writeTuningFile(path, tuningFavouring(cheap)).isOk());
    messaging::Options options;
    options.tuneFile = path;
    for (int nodes : {1, 2}) {
      runRanks(5, options, [&](RankEnv& env) {
        std::vector<NodeInfo> map;
        if (nodes == 2) {
          for (int r = 0; r < 5; ++r) map.push_back({r < 3 ? 0 : 1, r < 3 ? r : r - 3});
        }
        auto comm = Communicator::create(env.context, map);
        ASSERT_TRUE(comm.isOk()) << comm.status().toString();
        Side send = testing::vectorSide(3), recv = testing::denseSide(send.type, 3);
        AlltoallBuffers buffers(send, recv, (*comm)->size(), (*comm)->rank());
        auto plan =
            alltoallInit(**comm, buffers.sendbuf(), send.count, send.type, buffers.recvbuf(), recv.count, recv.type);
        ASSERT_TRUE(plan.isOk()) << plan.status().toString();
        // A radix plan names its radix ("bruck-radix-3").
        EXPECT_EQ(plan->algorithm().substr(0, alltoallAlgorithmName(cheap).size()), alltoallAlgorithmName(cheap))
            << "rank " << env.rank << " ran " << plan->algorithm();
        ASSERT_TRUE(plan->start().isOk());
        ASSERT_TRUE(plan->wait(messaging::testing::soon()).isOk());
        EXPECT_EQ(buffers.check(), "") << "rank " << env.rank;
      });
    }
  }
  std::remove(path.c_str());
}

// The blocking alltoall with a file that measured direct-write's init as
// cheap runs direct-write per call on every rank (counted as auto's choice)
// and delivers every byte; a file without that init fit keeps it out.
TEST(AlltoallSelectionThreads, BlockingCallTakesDirectWriteOnlyWithItsMeasuredInit) {
  const std::string path = ::testing::TempDir() + "ibdt-alltoall-percall-" + std::to_string(getpid()) + ".json";
  for (bool measuredInit : {true, false}) {
    Tuning tuning = tuningFavouring(AlltoallAlgorithm::kDirectWrite);
    if (measuredInit) {
      tuning.collectives.push_back({alltoallInitFitName(AlltoallAlgorithm::kDirectWrite), CollectiveCost{500, 20, 0}});
    }
    ASSERT_TRUE(messaging::writeTuningFile(path, tuning).isOk());
    messaging::Options options;
    options.tuneFile = path;
    runRanks(4, options, [&](RankEnv& env) {
      auto comm = Communicator::create(env.context);
      ASSERT_TRUE(comm.isOk()) << comm.status().toString();
      Side send = testing::byteSide(1000), recv = testing::byteSide(1000);
      for (int call = 0; call < 2; ++call) {
        AlltoallBuffers buffers(send, recv, (*comm)->size(), (*comm)->rank());
        Status status = alltoall(**comm, buffers.sendbuf(), send.count, send.type, buffers.recvbuf(), recv.count,
                                 recv.type, AlltoallOptions{}, messaging::testing::soon());
        ASSERT_TRUE(status.isOk()) << status.toString();
        EXPECT_EQ(buffers.check(), "") << "rank " << env.rank << ", call " << call;
      }
      const auto& counts = (*comm)->algorithmCounts().at("alltoall");
      const auto directWrite = counts.find("direct-write");
      if (measuredInit) {
        ASSERT_NE(directWrite, counts.end()) << "rank " << env.rank;
        EXPECT_EQ(directWrite->second, (AlgorithmCount{2, 2})) << "rank " << env.rank;
      } else {
        EXPECT_EQ(directWrite, counts.end()) << "rank " << env.rank;
      }
    });
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ibdt::collectives
