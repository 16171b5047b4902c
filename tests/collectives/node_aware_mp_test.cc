// Node-aware collectives among real processes under `ibdt-run --nodes K`
// (registered with K = 2 and 3): the launcher's simulated node map reaches
// the Communicator, splitByNode() and split() give the right members and
// carry traffic, and the hierarchical alltoall delivers every byte for
// contiguous and strided types, 1 and 2 leaders per node, direct and Bruck
// between the leaders, in place and not, persistent runs, a mismatched
// signature failing every rank; kAuto's choice (the hierarchical alltoall
// at 8 ranks on 2 nodes for small blocks) the same on every rank;
// the multiple alltoall of rows that cross the nodes.
#include <gtest/gtest.h>

#include <functional>
#include <string_view>
#include <vector>

#include "bootstrap/node_map.h"
#include "collectives/alltoall_select.h"
#include "collectives/alltoall_data.h"
#include "collectives/collectives_mp.h"
#include "ibdt/collectives.h"
#include "support/mp_test.h"

namespace ibdt::collectives {
namespace {

using test::mpDeadline;
using test::mpStore;
using testing::AlltoallBuffers;
using testing::hierarchical;
using testing::Side;

class NodeAwareMp : public testing::CollectivesMp {
 protected:
  // The parent ranks of `child`, gathered over `child`.
  std::vector<int64_t> parentRanksOver(Communicator& child) {
    const int64_t mine = comm_->rank();
    std::vector<int64_t> all(static_cast<size_t>(child.size()));
    Status status = allgather(child, &mine, 1, all.data(), mpDeadline());
    EXPECT_TRUE(status.isOk()) << status.toString();
    return all;
  }
};

TEST_F(NodeAwareMp, TheLaunchersNodeMapReachesTheCommunicator) {
  ASSERT_GE(mpStore().numNodes(), 2) << "run under ibdt-run --nodes K (K >= 2)";
  const std::vector<int> expected = bootstrap::blockNodeMap(comm_->size(), mpStore().numNodes());
  for (int r = 0; r < comm_->size(); ++r) EXPECT_EQ(comm_->node(r).nodeId, expected[static_cast<size_t>(r)]);
  EXPECT_EQ(comm_->nodeCount(), mpStore().numNodes());
  EXPECT_EQ(comm_->localSize(), mpStore().localSize());
}

TEST_F(NodeAwareMp, SplitByNodeGivesTheNodesRanksAndTheLeaders) {
  for (int leaders : {1, 2}) {
    auto split = comm_->splitByNode(leaders, mpDeadline());
    ASSERT_TRUE(split.isOk()) << split.status().toString();
    std::vector<int64_t> local, across;
    for (int r = 0; r < comm_->size(); ++r) {
      if (comm_->node(r).nodeId == mpStore().nodeId()) local.push_back(r);
      if (comm_->node(r).localRank < leaders) across.push_back(r);
    }
    ASSERT_EQ(split->node->size(), mpStore().localSize());
    EXPECT_EQ(split->node->rank(), mpStore().localRank());
    EXPECT_EQ(parentRanksOver(*split->node), local);
    ASSERT_EQ(split->leaders != nullptr, mpStore().localRank() < leaders);
    if (split->leaders) {
      EXPECT_EQ(parentRanksOver(*split->leaders), across);
    }
  }
}

// The node communicator's pairwise alltoall runs while the parent runs a
// hierarchical one; both byte-checked.
TEST_F(NodeAwareMp, PairwiseOnTheNodeWhileTheParentRunsHierarchical) {
  auto split = comm_->splitByNode(1, mpDeadline());
  ASSERT_TRUE(split.isOk()) << split.status().toString();
  Communicator& node = *split->node;
  Side side = testing::byteSide(3000), strided = testing::vectorSide(20);
  Side dense = testing::denseSide(strided.type, 20);
  AlltoallBuffers parentBuffers(strided, dense, comm_->size(), comm_->rank());
  AlltoallBuffers nodeBuffers(side, side, node.size(), node.rank());
  AlltoallOptions parentOptions;
  parentOptions.algorithm = AlltoallAlgorithm::kHierarchical;
  auto parentPlan = alltoallInit(*comm_, parentBuffers.sendbuf(), 20, strided.type, parentBuffers.recvbuf(), 20,
                                 dense.type, parentOptions);
  auto nodePlan = alltoallInit(node, nodeBuffers.sendbuf(), side.count, side.type, nodeBuffers.recvbuf(), side.count,
                               side.type, {AlltoallAlgorithm::kPairwise, 0});
  ASSERT_TRUE(parentPlan.isOk()) << parentPlan.status().toString();
  ASSERT_TRUE(nodePlan.isOk()) << nodePlan.status().toString();
  for (int run = 0; run < 3; ++run) {
    parentBuffers.clearReceive();
    nodeBuffers.clearReceive();
    ASSERT_TRUE(parentPlan->start().isOk());
    ASSERT_TRUE(nodePlan->start().isOk());
    Status nodeDone = nodePlan->wait(mpDeadline());  // every round posted at start: needs no other poll
    Status parentDone = parentPlan->wait(mpDeadline());
    ASSERT_TRUE(nodeDone.isOk()) << nodeDone.toString();
    ASSERT_TRUE(parentDone.isOk()) << parentDone.toString();
    EXPECT_EQ(parentBuffers.check(), "") << "run " << run;
    EXPECT_EQ(nodeBuffers.check(), "") << "run " << run;
    ASSERT_TRUE(mpStore().barrier(mpDeadline()).isOk());  // peers' runs end before the buffers are cleared
  }
}

// Direct one node pair at a time, direct all at once with 2 leaders, and
// Bruck; every block size, strided, in place and not; each plan started
// three times with new data.
TEST_F(NodeAwareMp, HierarchicalEveryBlockSizeLeaderExchangeAndInPlace) {
  for (const AlltoallOptions& options :
       {hierarchical(1, LeaderExchange::kDirect, 1), hierarchical(2, LeaderExchange::kDirect, 0),
        hierarchical(1, LeaderExchange::kBruck, 8)}) {
    struct Case {
      Side send, recv;
      bool inPlace;
    };
    std::vector<Case> cases;
    for (int64_t bytes : {0, 1, 13, 1000, 80000}) {
      cases.push_back({testing::byteSide(bytes), testing::byteSide(bytes), false});
      cases.push_back({testing::byteSide(bytes), testing::byteSide(bytes), true});
    }
    Side strided = testing::vectorSide(30);
    cases.push_back({strided, testing::denseSide(strided.type, 30), false});
    cases.push_back({strided, strided, true});
    for (const Case& c : cases) {
      AlltoallBuffers buffers(c.send, c.recv, comm_->size(), comm_->rank());
      auto plan = c.inPlace ? alltoallInit(*comm_, kInPlace, 0, datatype::Datatype(), buffers.recvbuf(), c.recv.count,
                                           c.recv.type, options)
                            : alltoallInit(*comm_, buffers.sendbuf(), c.send.count, c.send.type, buffers.recvbuf(),
                                           c.recv.count, c.recv.type, options);
      ASSERT_TRUE(plan.isOk()) << plan.status().toString();
      for (int run = 0; run < 3; ++run) {
        const std::string wrong = c.inPlace ? testing::runInPlaceChecked(*plan, buffers, run, mpDeadline())
                                            : testing::runChecked(*plan, buffers, run, mpDeadline());
        ASSERT_EQ(wrong, "") << c.recv.bytes() << " bytes, leaders " << options.leaders << ", "
                             << leaderExchangeName(options.leaderExchange) << (c.inPlace ? ", in place" : "")
                             << ", run " << run;
        ASSERT_TRUE(mpStore().barrier(mpDeadline()).isOk());
      }
    }
  }
}

// kAuto on the launcher's node map with the built-in model (no tuning
// file): every rank runs the model's choice for this shape, the same on
// every rank, every byte of three runs checked. Under --nodes 2 with 8
// ranks that is the hierarchical alltoall for 8-byte blocks.
TEST_F(NodeAwareMp, HierarchicalAutoRunsTheModelsChoiceOnEveryRank) {
  const AlltoallCostModel builtIn = AlltoallCostModel::builtIn();
  for (int64_t bytes : {8, 13, 4096}) {
    for (bool inPlace : {false, true}) {
      const Side side = testing::byteSide(bytes);
      AlltoallBuffers buffers(side, side, comm_->size(), comm_->rank());
      auto plan = inPlace ? alltoallInit(*comm_, kInPlace, 0, datatype::Datatype(), buffers.recvbuf(), side.count,
                                         side.type)
                          : alltoallInit(*comm_, buffers.sendbuf(), side.count, side.type, buffers.recvbuf(),
                                         side.count, side.type);
      ASSERT_TRUE(plan.isOk()) << plan.status().toString();
      const AlltoallChoice expected =
          selectAlltoall(builtIn, comm_->size(), bytes, true, comm_->nodeCount(), false, inPlace);
      EXPECT_EQ(plan->algorithm(), alltoallAlgorithmName(expected.algorithm)) << bytes << " B";
      if (comm_->size() == 8 && comm_->nodeCount() == 2 && bytes == 8) {
        EXPECT_EQ(plan->algorithm(), "hierarchical");
      }
      // The same on every rank.
      const int64_t mine = static_cast<int64_t>(std::hash<std::string_view>{}(plan->algorithm()));
      std::vector<int64_t> all(static_cast<size_t>(comm_->size()));
      ASSERT_TRUE(allgather(*comm_, &mine, 1, all.data(), mpDeadline()).isOk());
      for (int64_t theirs : all) EXPECT_EQ(theirs, mine);
      for (int run = 0; run < 3; ++run) {
        const std::string wrong = inPlace ? testing::runInPlaceChecked(*plan, buffers, run, mpDeadline())
                                          : testing::runChecked(*plan, buffers, run, mpDeadline());
        ASSERT_EQ(wrong, "") << bytes << " bytes, " << plan->algorithm() << (inPlace ? ", in place" : "") << ", run "
                             << run;
        ASSERT_TRUE(mpStore().barrier(mpDeadline()).isOk());
      }
    }
  }
}

// A rank whose blocks differ fails init on every rank (no hang), with
// either leader exchange, in place or not.
TEST_F(NodeAwareMp, HierarchicalMismatchedSignatureFailsEveryRank) {
  std::vector<uint8_t> a(static_cast<size_t>(comm_->size()) * 64), b(a.size());
  const datatype::Datatype byte = datatype::Datatype::basic(datatype::BasicKind::kByte);
  const int64_t count = comm_->rank() == comm_->size() - 1 ? 8 : 16;
  for (LeaderExchange exchange : {LeaderExchange::kDirect, LeaderExchange::kBruck}) {
    for (bool inPlace : {false, true}) {
      auto plan = alltoallInit(*comm_, inPlace ? kInPlace : a.data(), count, byte, b.data(), count, byte,
                               hierarchical(1, exchange, 8));
      ASSERT_FALSE(plan.isOk());
      EXPECT_EQ(plan.status().code(), Code::kInvalidArgument) << plan.status().toString();
      EXPECT_NE(plan.status().toString().find("match"), std::string::npos) << plan.status().toString();
    }
  }
}

// Rows across the nodes (rank % 2), each an alltoall, merged node by node.
TEST_F(NodeAwareMp, MultipleAlltoallOfRowsAcrossNodes) {
  auto row = comm_->split(comm_->rank() % 2, comm_->rank(), mpDeadline());
  ASSERT_TRUE(row.isOk()) << row.status().toString();
  for (int64_t bytes : {1, 1000}) {
    Side side = testing::byteSide(bytes);
    AlltoallBuffers buffers(side, side, (*row)->size(), (*row)->rank());
    auto plan = multipleAlltoallInit(*comm_, **row, buffers.sendbuf(), side.count, side.type, buffers.recvbuf(),
                                     side.count, side.type);
    ASSERT_TRUE(plan.isOk()) << plan.status().toString();
    for (int run = 0; run < 2; ++run) {
      buffers.clearReceive();
      ASSERT_TRUE(plan->start().isOk());
      Status status = plan->wait(mpDeadline());
      ASSERT_TRUE(status.isOk()) << status.toString();
      EXPECT_EQ(buffers.check(), "") << bytes << " bytes, run " << run;
      ASSERT_TRUE(mpStore().barrier(mpDeadline()).isOk());
    }
  }
}

}  // namespace
}  // namespace ibdt::collectives
