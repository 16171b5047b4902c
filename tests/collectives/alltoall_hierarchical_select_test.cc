// kAuto choosing the hierarchical alltoall (docs/alltoall-hierarchical.md,
// "Automatic choice"): its volume (the leader's messages; the relay's
// where the plan is the relay, and the price that follows), the built-in
// model's choice on several nodes only, a tuning file's samples deciding on
// the nodes they were timed on, and with thread ranks on simulated nodes
// (p in 1..8, two and three nodes in blocks) every rank running the same
// algorithm, the file's, every received byte checked, even when the ranks'
// files disagree.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <string>

#include "collectives/alltoall_data.h"
#include "collectives/alltoall_select.h"
#include "collectives/tuning_favouring.h"
#include "ibdt/collectives.h"
#include "perf/simulated_nodes.h"
#include "support/thread_ranks.h"

namespace ibdt::collectives {
namespace {

using datatype::Datatype;
using messaging::Tuning;
using messaging::testing::RankEnv;
using messaging::testing::runRanksWith;
using messaging::testing::soon;
using testing::AlltoallBuffers;
using testing::Side;
using testing::tuningFavouring;

constexpr AlltoallAlgorithm kHierarchical = AlltoallAlgorithm::kHierarchical;

// Rank 0 leads node 0 of 4 ranks (p = 8 on 2 nodes): it scatters 3 rows of
// 8 blocks and sends 1 node-block of 4 x 4 blocks; of its three stages only
// the exchange crosses nodes.
TEST(HierarchicalSelection, VolumeIsTheLeaders) {
  const AlltoallVolume volume = alltoallVolume(kHierarchical, 2, 8, 10, 2);
  EXPECT_EQ(volume.messages, 3 + 1);
  EXPECT_EQ(volume.bytes, 3 * 8 * 10 + 4 * 4 * 10);
  EXPECT_EQ(volume.rounds, 3);
  EXPECT_EQ(volume.networkRounds, 1);
  // 24 nodes: the exchange runs in windows of 8 node pairs (the default throttle).
  EXPECT_EQ(alltoallVolume(kHierarchical, 2, 48, 10, 24).networkRounds, 3);
  // Other algorithms: every round crosses, the node count changes nothing.
  const AlltoallVolume pairwise = alltoallVolume(AlltoallAlgorithm::kPairwise, 2, 64, 8, 4);
  EXPECT_EQ(pairwise.networkRounds, pairwise.rounds);
  EXPECT_EQ(pairwise.bytes, alltoallVolume(AlltoallAlgorithm::kPairwise, 2, 64, 8).bytes);
}

// The relay (the plan where a member's chunk, 8 x 64 KiB at p = 8, takes
// the single copy): rank 0 writes 3 blocks to its node and one run of 4
// blocks to each of the 4 ranks of node 1 (19 blocks where the two-sided
// leader sends 3 rows of 8 and a node-block of 16: 40), after 4 readies (3
// on its node, 1 from node 1's leader); readies and relays cross nodes.
// The model prices the relay from the single-copy size on (the Context's,
// which kAuto passes in), so its price falls there, and follows the
// predicate it is given.
TEST(HierarchicalSelection, TheRelayIsPricedWhereThePlanIsTheRelay) {
  constexpr int64_t kBlock = 65536;
  const AlltoallVolume relay = alltoallVolume(kHierarchical, 2, 8, kBlock, 2, /*relay=*/true);
  EXPECT_EQ(relay.messages, 4 + 3 + 4);
  EXPECT_EQ(relay.bytes, (3 + 4 * 4) * kBlock);
  EXPECT_EQ(relay.rounds, 4);
  EXPECT_EQ(relay.networkRounds, 2);
  EXPECT_EQ(alltoallVolume(kHierarchical, 2, 8, kBlock, 2).bytes, (3 * 8 + 16) * kBlock);
  AlltoallCostModel model = AlltoallCostModel::builtIn();
  const messaging::CollectiveCost& cost = *model.cost(kHierarchical);
  const double network = 2 * model.networkRoundNs();
  EXPECT_DOUBLE_EQ(model.predictNs(kHierarchical, 2, 8, kBlock, 2), cost.ns(relay.messages, relay.bytes) + network);
  // Below the built-in threshold (chunk 8 x 4 KiB = 32 KiB): two-sided.
  const AlltoallVolume small = alltoallVolume(kHierarchical, 2, 8, 4096, 2);
  EXPECT_DOUBLE_EQ(model.predictNs(kHierarchical, 2, 8, 4096, 2),
                   cost.ns(small.messages, small.bytes) + model.networkRoundNs());
  model.setRelayed([](int64_t) { return false; });  // a Context that never takes the single copy
  const AlltoallVolume twoSided = alltoallVolume(kHierarchical, 2, 8, kBlock, 2);
  EXPECT_DOUBLE_EQ(model.predictNs(kHierarchical, 2, 8, kBlock, 2),
                   cost.ns(twoSided.messages, twoSided.bytes) + model.networkRoundNs());
  EXPECT_LT(AlltoallCostModel::builtIn().predictNs(kHierarchical, 2, 8, kBlock, 2),
            model.predictNs(kHierarchical, 2, 8, kBlock, 2));
}

// The built-in model: on 4 nodes of 4 ranks, small blocks go hierarchical
// (one window of 3 node pairs plus 3 local messages against pairwise's 15
// messages in 2 windows and Bruck's 2-4 rounds), 4 KiB blocks do not (the
// leader moves 96 blocks, a pairwise rank 15); never on one node, with one rank per node, in a
// build that is not collective, or per call without a measured init.
TEST(HierarchicalSelection, BuiltInModelChoosesItOnSeveralNodesOnly) {
  const AlltoallCostModel builtIn = AlltoallCostModel::builtIn();
  for (int64_t bytes : {1, 8, 64}) {
    EXPECT_EQ(selectAlltoall(builtIn, 16, bytes, true, 4).algorithm, kHierarchical) << bytes;
    EXPECT_EQ(selectAlltoall(builtIn, 16, bytes, true, 4, false, /*inPlace=*/true).algorithm, kHierarchical);
    EXPECT_NE(selectAlltoall(builtIn, 16, bytes, true, 1).algorithm, kHierarchical) << bytes;
    EXPECT_NE(selectAlltoall(builtIn, 16, bytes, true, 16).algorithm, kHierarchical) << bytes;
    EXPECT_NE(selectAlltoall(builtIn, 16, bytes, false, 4).algorithm, kHierarchical) << bytes;
    EXPECT_NE(selectAlltoall(builtIn, 16, bytes, true, 4, /*perCall=*/true).algorithm, kHierarchical) << bytes;
  }
  EXPECT_NE(selectAlltoall(builtIn, 16, 4096, true, 4).algorithm, kHierarchical);
  // The benchmark's shapes: 2 nodes of 4 ranks, 8 B (4 messages of the
  // leader against pairwise's 7); 2 of 2: pairwise (no fewer messages).
  EXPECT_EQ(selectAlltoall(builtIn, 8, 8, true, 2).algorithm, kHierarchical);
  EXPECT_NE(selectAlltoall(builtIn, 8, 4096, true, 2).algorithm, kHierarchical);
  EXPECT_EQ(selectAlltoall(builtIn, 4, 8, true, 2).algorithm, AlltoallAlgorithm::kPairwise);
  EXPECT_EQ(selectAlltoall(builtIn, 1, 8, true, 1).algorithm, AlltoallAlgorithm::kPairwise);
  EXPECT_EQ(selectAlltoall(builtIn, 16, 0, true, 4).algorithm, AlltoallAlgorithm::kPairwise);
  for (int p = 1; p <= 64; ++p) {
    for (int nodes : {1, 2, 3, 4}) {
      EXPECT_EQ(selectAlltoall(builtIn, p, 8, true, nodes).code(), selectAlltoall(builtIn, p, 8, true, nodes).code());
    }
  }
}

// A file with pairwise and hierarchical timed at p = 4 and 8: where the
// hierarchical alltoall measured half of pairwise (p = 8) it is chosen on
// kTunedNodes nodes, where it measured more (p = 4) it is not; within the
// margin pairwise stays; on another node count its samples do not apply
// and, as pairwise is timed there, its fit does not compete.
TEST(HierarchicalSelection, SamplesDecideOnTheNodesTheyWereTimedOn) {
  auto fileWith = [](double hierarchicalAtEight) {
    Tuning tuning = tuningFavouring(AlltoallAlgorithm::kPairwise);
    for (messaging::CollectiveFit& fit : tuning.collectives) {
      fit.samples.clear();
      for (int64_t block : {8, 256, 4096}) {
        if (fit.name == alltoallFitName(AlltoallAlgorithm::kPairwise)) {
          fit.samples.insert(fit.samples.end(), {{4, block, 10000.0}, {8, block, 100000.0}});
        } else if (fit.name == alltoallFitName(kHierarchical)) {
          fit.samples.insert(fit.samples.end(), {{4, block, 20000.0}, {8, block, hierarchicalAtEight}});
        } else {
          fit.samples.insert(fit.samples.end(), {{4, block, 40000.0}, {8, block, 400000.0}});
        }
      }
    }
    return AlltoallCostModel::fromTuning(&tuning);
  };
  const AlltoallCostModel half = fileWith(50000.0);
  for (int64_t block : {8, 64, 256, 1000, 4096}) {
    const AlltoallChoice choice = selectAlltoall(half, 8, block, true, kTunedNodes);
    EXPECT_EQ(choice.algorithm, kHierarchical) << block;
    EXPECT_TRUE(half.sampled(kHierarchical, 2, 8, block, kTunedNodes));
    EXPECT_EQ(selectAlltoall(half, 4, block, true, kTunedNodes).algorithm, AlltoallAlgorithm::kPairwise) << block;
    EXPECT_FALSE(half.sampled(kHierarchical, 2, 8, block, 3));
    EXPECT_EQ(selectAlltoall(half, 8, block, true, 3).algorithm, AlltoallAlgorithm::kPairwise) << block;
    EXPECT_EQ(selectAlltoall(half, 8, block, true, 1).algorithm, AlltoallAlgorithm::kPairwise) << block;
  }
  // Outside the timed sizes: the fits (which favour pairwise).
  EXPECT_EQ(selectAlltoall(half, 8, 65536, true, kTunedNodes).algorithm, AlltoallAlgorithm::kPairwise);
  // 5 % below pairwise: within kSampledMargin, pairwise stays.
  EXPECT_EQ(selectAlltoall(fileWith(95000.0), 8, 256, true, kTunedNodes).algorithm, AlltoallAlgorithm::kPairwise);
}

// Thread ranks whose Contexts load a file each (rank -> path).
class HierarchicalAutoThreads : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const Tuning& tuning) {
    const std::string path = ::testing::TempDir() + "ibdt-hier-auto-" + name + "-" + std::to_string(getpid()) + ".json";
    EXPECT_TRUE(messaging::writeTuningFile(path, tuning).isOk());
    paths_.push_back(path);
    return path;
  }
  void TearDown() override {
    for (const std::string& path : paths_) std::remove(path.c_str());
  }

 private:
  std::vector<std::string> paths_;
};

// Runs kAuto once on `p` thread ranks over `nodes` simulated nodes (blocks),
// rank r loading fileOf(r); every rank must run `expected`, and every byte
// of two runs (in place and not) arrive.
void autoOnNodes(int p, int nodes, const std::function<std::string(int)>& fileOf, const std::string& expected) {
  runRanksWith(
      p,
      [&](int rank) {
        messaging::Options options;
        options.tuneFile = fileOf(rank);
        return options;
      },
      [&](RankEnv& env) {
        auto comm = Communicator::create(env.context, perf::simulatedNodes(p, nodes));
        ASSERT_TRUE(comm.isOk()) << comm.status().toString();
        for (bool inPlace : {false, true}) {
          const Side strided = testing::vectorSide(13), recv = testing::denseSide(strided.type, 13);
          const Side send = inPlace ? recv : strided;
          AlltoallBuffers buffers(send, recv, p, env.rank);
          auto plan = inPlace ? alltoallInit(**comm, kInPlace, 0, Datatype(), buffers.recvbuf(), recv.count, recv.type)
                              : alltoallInit(**comm, buffers.sendbuf(), send.count, send.type, buffers.recvbuf(),
                                             recv.count, recv.type);
          ASSERT_TRUE(plan.isOk()) << plan.status().toString();
          EXPECT_EQ(plan->algorithm(), expected)
              << "rank " << env.rank << " of " << p << " on " << nodes << " nodes" << (inPlace ? ", in place" : "");
          for (int run = 0; run < 2; ++run) {
            const std::string wrong = inPlace ? testing::runInPlaceChecked(*plan, buffers, run, soon())
                                              : testing::runChecked(*plan, buffers, run, soon());
            ASSERT_EQ(wrong, "") << "rank " << env.rank << " of " << p << ", run " << run;
            env.barrier();  // nobody refills its buffers while a peer's run still runs
          }
        }
      });
}

// A file favouring the hierarchical alltoall: every rank runs it wherever
// the ranks span several nodes with several ranks on one (p > nodes), and
// pairwise elsewhere (every other algorithm costs 100 us a message).
TEST_F(HierarchicalAutoThreads, EveryRankRunsTheFilesChoiceOnEveryShape) {
  const std::string favouring = write("favouring", tuningFavouring(kHierarchical));
  for (int nodes : {2, 3}) {
    for (int p : {1, 2, 3, 4, 5, 7, 8}) {
      const bool hierarchical = p > std::min(p, nodes) && std::min(p, nodes) > 1;
      autoOnNodes(
          p, nodes, [&](int) { return favouring; }, hierarchical ? "hierarchical" : "pairwise");
    }
  }
}

// Files that disagree (nodes may load different ones): the ranks agree in
// one allreduce on the smallest choice, so all run one algorithm: pairwise
// when one rank's file favours it, zero-copy Bruck when one rank's does.
TEST_F(HierarchicalAutoThreads, RanksWhoseFilesDisagreeRunOneAlgorithm) {
  const std::string hierarchical = write("hierarchical", tuningFavouring(kHierarchical));
  const std::string pairwise = write("pairwise", tuningFavouring(AlltoallAlgorithm::kPairwise));
  const std::string zeroCopy = write("zero-copy", tuningFavouring(AlltoallAlgorithm::kBruckZeroCopy));
  autoOnNodes(
      6, 2, [&](int rank) { return rank == 4 ? pairwise : hierarchical; }, "pairwise");
  autoOnNodes(
      6, 2, [&](int rank) { return rank == 0 ? zeroCopy : hierarchical; }, "bruck-zero-copy");
  autoOnNodes(
      6, 2, [&](int) { return hierarchical; }, "hierarchical");
}

}  // namespace
}  // namespace ibdt::collectives
