// Communicator::split and splitByNode with ranks as threads over the
// loopback fabric: membership, rank order, sizes, Context ranks and node
// entries checked against a reference computed from the same colour/key
// tables; traffic on the new communicators (an allgather of parent ranks,
// a byte-checked pairwise alltoall while the parent runs another) proves
// their ranks and context ids really map.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "collectives/alltoall_data.h"
#include "ibdt/collectives.h"
#include "support/thread_ranks.h"

namespace ibdt::collectives {
namespace {

using messaging::testing::RankEnv;
using messaging::testing::runRanks;
using messaging::testing::soon;
using testing::AlltoallBuffers;

// The parent ranks of `child`, gathered over `child` itself.
std::vector<int64_t> parentRanksOver(Communicator& child, int parentRank) {
  const int64_t mine = parentRank;
  std::vector<int64_t> all(static_cast<size_t>(child.size()));
  Status status = allgather(child, &mine, 1, all.data(), soon());
  EXPECT_TRUE(status.isOk()) << status.toString();
  return all;
}

TEST(SplitThreads, RandomColoursAndKeysMatchTheReference) {
  for (int size : {1, 2, 3, 5, 8}) {
    runRanks(size, {}, [&](RankEnv& env) {
      auto world = Communicator::create(env.context);
      ASSERT_TRUE(world.isOk());
      std::mt19937 random(1234 + size);  // the same tables on every rank
      for (int trial = 0; trial < 4; ++trial) {
        std::vector<int> colour(static_cast<size_t>(size)), key(static_cast<size_t>(size));
        for (int r = 0; r < size; ++r) {
          colour[static_cast<size_t>(r)] = static_cast<int>(random() % 4) - 1;  // -1: kUndefinedColour
          key[static_cast<size_t>(r)] = static_cast<int>(random() % 3) - 1;     // ties broken by parent rank
        }
        std::vector<int64_t> expected;  // parent ranks of my colour, by (key, rank)
        for (int r = 0; r < size; ++r) {
          if (colour[static_cast<size_t>(r)] == colour[static_cast<size_t>(env.rank)]) expected.push_back(r);
        }
        std::stable_sort(expected.begin(), expected.end(),
                         [&](int64_t a, int64_t b) { return key[static_cast<size_t>(a)] < key[static_cast<size_t>(b)]; });
        auto child = (*world)->split(colour[static_cast<size_t>(env.rank)], key[static_cast<size_t>(env.rank)], soon());
        ASSERT_TRUE(child.isOk()) << child.status().toString();
        if (colour[static_cast<size_t>(env.rank)] == kUndefinedColour) {
          EXPECT_EQ(*child, nullptr);
          continue;
        }
        Communicator& comm = **child;
        ASSERT_EQ(comm.size(), static_cast<int>(expected.size()));
        EXPECT_EQ(expected[static_cast<size_t>(comm.rank())], env.rank);
        for (int r = 0; r < comm.size(); ++r) EXPECT_EQ(comm.contextRank(r), expected[static_cast<size_t>(r)]);
        EXPECT_GT(comm.contextId(), (*world)->contextId());
        EXPECT_EQ(parentRanksOver(comm, env.rank), expected);
      }
    });
  }
}

TEST(SplitThreads, UndefinedColourBelowMinusOneIsRefused) {
  runRanks(2, {}, [&](RankEnv& env) {
    auto world = Communicator::create(env.context);
    ASSERT_TRUE(world.isOk());
    auto bad = (*world)->split(-2, 0, soon());
    ASSERT_FALSE(bad.isOk());
    EXPECT_EQ(bad.status().code(), Code::kInvalidArgument) << bad.status().toString();
    auto good = (*world)->split(0, -env.rank, soon());  // reversed by key
    ASSERT_TRUE(good.isOk()) << good.status().toString();
    EXPECT_EQ((*good)->rank(), 1 - env.rank);
  });
}

struct NodeMapCase {
  const char* name;
  std::vector<int> nodeOfRank;
};

// Node comm: the ranks of my node in rank order; leaders: local ranks < L of
// every node; both with traffic, context ids distinct from the parent's.
void checkNodeSplit(RankEnv& env, const std::vector<int>& nodeOfRank, int leadersPerNode) {
  const int size = static_cast<int>(nodeOfRank.size());
  std::vector<NodeInfo> map;
  std::vector<int> seen(static_cast<size_t>(size), 0);
  for (int node : nodeOfRank) map.push_back({node, seen[static_cast<size_t>(node)]++});
  auto world = Communicator::create(env.context, map);
  ASSERT_TRUE(world.isOk());
  auto split = (*world)->splitByNode(leadersPerNode, soon());
  ASSERT_TRUE(split.isOk()) << split.status().toString();
  std::vector<int64_t> local, leaders;
  for (int r = 0; r < size; ++r) {
    if (nodeOfRank[static_cast<size_t>(r)] == nodeOfRank[static_cast<size_t>(env.rank)]) local.push_back(r);
    if (map[static_cast<size_t>(r)].localRank < leadersPerNode) leaders.push_back(r);
  }
  Communicator& node = *split->node;
  EXPECT_EQ(node.size(), static_cast<int>(local.size()));
  EXPECT_EQ(node.nodeCount(), 1);
  EXPECT_EQ(node.localSize(), node.size());
  EXPECT_EQ(node.node(node.rank()).localRank, map[static_cast<size_t>(env.rank)].localRank);
  EXPECT_EQ(parentRanksOver(node, env.rank), local);
  const bool leader = map[static_cast<size_t>(env.rank)].localRank < leadersPerNode;
  ASSERT_EQ(split->leaders != nullptr, leader);
  if (leader) {
    Communicator& across = *split->leaders;
    EXPECT_EQ(across.size(), static_cast<int>(leaders.size()));
    EXPECT_EQ(across.nodeCount(), (*world)->nodeCount());
    EXPECT_NE(across.contextId(), node.contextId());
    EXPECT_EQ(parentRanksOver(across, env.rank), leaders);
  }
  EXPECT_NE(node.contextId(), (*world)->contextId());
}

TEST(SplitByNodeThreads, OneTwoThreeAndUnevenNodes) {
  const std::vector<NodeMapCase> cases = {
      {"one node", {0, 0, 0, 0}},         {"two nodes", {0, 0, 0, 1, 1, 1}},
      {"three uneven", {0, 0, 0, 1, 2, 2, 2}}, {"interleaved", {1, 0, 1, 0, 2}},
      {"single rank", {0}},
  };
  for (const NodeMapCase& c : cases) {
    SCOPED_TRACE(c.name);
    for (int leadersPerNode : {1, 2}) {
      runRanks(static_cast<int>(c.nodeOfRank.size()), {},
               [&](RankEnv& env) { checkNodeSplit(env, c.nodeOfRank, leadersPerNode); });
    }
  }
}

// A split communicator's alltoall and the parent's run at the same time;
// both are checked byte by byte (different context ids keep them apart).
TEST(SplitThreads, PairwiseOnAChildWhileTheParentRunsAnother) {
  constexpr int kRanks = 5;
  runRanks(kRanks, {}, [&](RankEnv& env) {
    auto world = Communicator::create(env.context);
    ASSERT_TRUE(world.isOk());
    auto child = (*world)->split(env.rank % 2, kRanks - env.rank, soon());  // evens and odds, reversed
    ASSERT_TRUE(child.isOk()) << child.status().toString();
    Communicator& parent = **world;
    Communicator& sub = **child;
    auto side = testing::byteSide(1000), strided = testing::vectorSide(9);
    AlltoallBuffers parentBuffers(side, side, parent.size(), parent.rank());
    AlltoallBuffers childBuffers(strided, testing::denseSide(strided.type, 9), sub.size(), sub.rank());
    const AlltoallOptions options{AlltoallAlgorithm::kPairwise, 0};  // every round posted at start
    auto parentPlan = alltoallInit(parent, parentBuffers.sendbuf(), side.count, side.type, parentBuffers.recvbuf(),
                                   side.count, side.type, options);
    auto childPlan = alltoallInit(sub, childBuffers.sendbuf(), 9, strided.type, childBuffers.recvbuf(), 9,
                                  childBuffers.recvSide().type, options);
    ASSERT_TRUE(parentPlan.isOk() && childPlan.isOk());
    for (int run = 0; run < 3; ++run) {
      parentBuffers.clearReceive();
      childBuffers.clearReceive();
      ASSERT_TRUE(parentPlan->start().isOk());
      ASSERT_TRUE(childPlan->start().isOk());
      Status childDone = childPlan->wait(soon());
      Status parentDone = parentPlan->wait(soon());
      ASSERT_TRUE(childDone.isOk()) << childDone.toString();
      ASSERT_TRUE(parentDone.isOk()) << parentDone.toString();
      EXPECT_EQ(parentBuffers.check(), "");
      EXPECT_EQ(childBuffers.check(), "");
      env.barrier();
    }
  });
}

}  // namespace
}  // namespace ibdt::collectives
