// kAuto in a collective init, with ranks as threads over the loopback
// fabric (built-in model: these Contexts load no tuning file):
// - alltoallv (docs/alltoallv.md, "Automatic choice"): every count spread
//   (regular and irregular) at p in {1, 2, 3, 4, 5, 8}, bytes and strided ->
//   dense types; every byte checked over two runs of the plan, and every
//   rank's chosen algorithm equal (allgathered) and the model's for the
//   agreed problem (on one node the shared segment; the message algorithms
//   on two simulated nodes), also when the ranks' own counts differ wildly;
// - alltoall picks direct-write for large blocks, every byte checked;
// - per-call (blocking) and pinned-tag builds stay local (pairwise);
// - the choices are counted per communicator and printed (IBDT_STATS).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "collectives/alltoall_data.h"
#include "collectives/alltoallv_algorithms.h"
#include "collectives/alltoallv_data.h"
#include "collectives/alltoallv_select.h"
#include "collectives/world.h"
#include "perf/simulated_nodes.h"
#include "ibdt/collectives.h"
#include "support/scoped_env.h"
#include "support/thread_ranks.h"

namespace ibdt::collectives {
namespace {

using datatype::Datatype;
using messaging::testing::RankEnv;
using messaging::testing::runRanks;
using messaging::testing::soon;
using testing::AlltoallBuffers;
using testing::AlltoallvBuffers;
using testing::CountMatrix;
using testing::Side;
using testing::Spread;

using testing::world;

// The alltoallv algorithms' names, as a number every rank can allgather.
int64_t algorithmCode(std::string_view name) {
  constexpr std::string_view kNames[] = {"pairwise", "bruck-zero-copy", "direct-write", "shared-memory"};
  for (size_t i = 0; i < std::size(kNames); ++i) {
    if (name == kNames[i]) return static_cast<int64_t>(i);
  }
  return -1;
}

// What the agreement of every rank yields, computed from the whole matrix
// (every rank of the test knows it) and `dense` / `kind` of the types.
AlltoallvAgreement expectedAgreement(const CountMatrix& counts, int64_t elementBytes, bool dense,
                                     std::optional<datatype::BasicKind> kind) {
  const size_t p = counts.size();
  AlltoallvAgreement agreed;
  agreed.minBlockBytes = p > 1 ? INT64_MAX : 0;
  for (size_t i = 0; i < p; ++i) {
    int64_t sent = 0, received = 0;
    for (size_t j = 0; j < p; ++j) {
      if (i == j) continue;
      agreed.minBlockBytes = std::min(agreed.minBlockBytes, counts[i][j] * elementBytes);
      agreed.maxBlockBytes = std::max(agreed.maxBlockBytes, counts[i][j] * elementBytes);
      sent += counts[i][j] * elementBytes;
      received += counts[j][i] * elementBytes;
    }
    agreed.maxRankBytes = std::max({agreed.maxRankBytes, sent, received});
  }
  agreed.dense = dense;
  agreed.kind = kind;
  return agreed;
}

std::string_view expectedName(const AlltoallvAgreement& agreed, int p, int nodes = 1) {
  return alltoallvAlgorithmName(selectAlltoallv(AlltoallCostModel::builtIn(), p, agreed, nodes).algorithm);
}

// One persistent auto alltoallv of `counts`, run twice: every byte right,
// the algorithm the expected one and the same on every rank.
void runAutoAlltoallv(Communicator& comm, const CountMatrix& counts, const Side& send, const Side& recv,
                      uint64_t seed, std::string_view expected, const std::string& where) {
  AlltoallvBuffers buffers(counts, send, recv, comm.rank(), seed);
  auto plan = alltoallvInit(comm, buffers.sendbuf(), buffers.sendcounts(), buffers.sdispls(), send.type,
                            buffers.recvbuf(), buffers.recvcounts(), buffers.rdispls(), recv.type);
  ASSERT_TRUE(plan.isOk()) << where << ": " << plan.status().toString();
  EXPECT_EQ(plan->algorithm(), expected) << where;
  const int64_t mine = algorithmCode(plan->algorithm());
  std::vector<int64_t> everyone(static_cast<size_t>(comm.size()));
  ASSERT_TRUE(allgather(comm, &mine, 1, everyone.data(), soon()).isOk());
  EXPECT_EQ(std::count(everyone.begin(), everyone.end(), mine), comm.size()) << where << ": ranks chose differently";
  for (int run = 0; run < 2; ++run) {
    buffers.clearReceive();
    ASSERT_TRUE(plan->start().isOk());
    Status status = plan->wait(soon());
    ASSERT_TRUE(status.isOk()) << where << " run " << run << ": " << status.toString();
    EXPECT_EQ(buffers.check(), "") << where << " run " << run;
  }
}

class AutoAlltoallvThreads : public ::testing::TestWithParam<int> {};

// Every spread, regular (all equal) and irregular, at a small scale and a
// large one, bytes (dense, one kind) and strided int32 -> dense (one kind,
// not dense); one node, so the built-in model picks the shared segment.
TEST_P(AutoAlltoallvThreads, EverySpreadExactAndTheSameChoiceOnEveryRank) {
  const int size = GetParam();
  runRanks(size, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    const Side bytes = testing::byteSide(1);
    const Side strided = testing::vectorSide(1);
    const Side dense = testing::denseSide(strided.type, 1);
    for (Spread spread : testing::kSpreads) {
      for (int64_t scale : {int64_t{8}, int64_t{30000}}) {
        // Large blocks (pairwise / direct-write territory) up to 2 threads:
        // at 3, 5 and 8 threads they took 30 to over 120 s under ASan on
        // 2 cores; p >= 3 keeps the small scale.
        if (scale > 8 && size > 2) continue;
        const uint64_t seed = static_cast<uint64_t>(size * 31 + scale) + static_cast<uint64_t>(spread);
        const std::string where = std::string(testing::spreadName(spread)) + " scale " + std::to_string(scale);
        const CountMatrix byteCounts = testing::countMatrix(spread, size, seed, scale);
        runAutoAlltoallv(*comm, byteCounts, bytes, bytes, seed,
                         expectedName(expectedAgreement(byteCounts, 1, true, uniformKind(bytes.type)), size),
                         where + " bytes");
        if (::testing::Test::HasFatalFailure()) return;
        const CountMatrix intCounts = testing::countMatrix(spread, size, seed + 1, std::max<int64_t>(1, scale / 4));
        runAutoAlltoallv(*comm, intCounts, strided, dense, seed + 1,
                         expectedName(expectedAgreement(intCounts, strided.type.size(), false,
                                                        uniformKind(strided.type)),
                                      size),
                         where + " strided -> dense");
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, AutoAlltoallvThreads, ::testing::Values(1, 2, 3, 4, 5, 8));

// AlltoallvOptions::scratchBytes: set on rank 0 alone, it keeps every rank
// off the shared segment (whose share here is 64 + 2 x 120000 B) and the
// plan's scratch within it; unset, the segment. Every byte checked.
TEST(AutoAlltoallv, AScratchBoundOnOneRankKeepsEveryRankWithinIt) {
  runRanks(4, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    const Side bytes = testing::byteSide(1);
    for (int64_t bound : {int64_t{0}, int64_t{128} << 10}) {
      AlltoallvOptions options;
      if (env.rank == 0) options.scratchBytes = bound;
      AlltoallvBuffers buffers(testing::countMatrix(Spread::kAllEqual, 4, 3, 40000), bytes, bytes, env.rank, 3);
      auto plan = alltoallvInit(*comm, buffers.sendbuf(), buffers.sendcounts(), buffers.sdispls(), bytes.type,
                                buffers.recvbuf(), buffers.recvcounts(), buffers.rdispls(), bytes.type, options);
      ASSERT_TRUE(plan.isOk()) << plan.status().toString();
      if (bound == 0) {
        EXPECT_EQ(plan->algorithm(), "shared-memory");
      } else {
        EXPECT_NE(plan->algorithm(), "shared-memory") << "rank " << env.rank;
      }
      const int64_t mine = algorithmCode(plan->algorithm());
      std::vector<int64_t> everyone(4);
      ASSERT_TRUE(allgather(*comm, &mine, 1, everyone.data(), soon()).isOk());
      EXPECT_EQ(std::count(everyone.begin(), everyone.end(), mine), 4) << "ranks chose differently";
      for (int run = 0; run < 2; ++run) {
        buffers.clearReceive();
        ASSERT_TRUE(plan->start().isOk());
        ASSERT_TRUE(plan->wait(soon()).isOk());
        EXPECT_EQ(buffers.check(), "") << "bound " << bound << " run " << run;
      }
      if (bound > 0) {
        EXPECT_LE(plan->peakExtraBytes(), bound) << plan->algorithm();
      }
    }
  });
}

// The built-in model's answers at 8 ranks, each checked byte by byte: on
// one node the shared segment, small blocks and strided alike; on two
// simulated nodes large dense blocks -> direct-write, a strided type with
// large blocks -> pairwise (direct-write needs dense blocks), small ones ->
// pairwise.
TEST(AutoAlltoallv, PicksEachAlgorithmWhereTheModelSaysItWins) {
  runRanks(8, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    const Side bytes = testing::byteSide(1);
    const Side strided = testing::vectorSide(1);
    runAutoAlltoallv(*comm, testing::countMatrix(Spread::kAllEqual, 8, 1, 16), bytes, bytes, 1, "shared-memory",
                     "16 B, one node");
    runAutoAlltoallv(*comm, testing::countMatrix(Spread::kRandom, 8, 4, 1000), strided,
                     testing::denseSide(strided.type, 1), 4, "shared-memory", "random strided, one node");
    auto twoNodes = Communicator::create(env.context, perf::simulatedNodes(8, 2));
    ASSERT_TRUE(twoNodes.isOk()) << twoNodes.status().toString();
    runAutoAlltoallv(**twoNodes, testing::countMatrix(Spread::kAllEqual, 8, 5, 16), bytes, bytes, 5, "pairwise",
                     "16 B, two nodes");
    runAutoAlltoallv(**twoNodes, testing::countMatrix(Spread::kAllEqual, 8, 2, 65536), bytes, bytes, 2,
                     "direct-write", "64 KiB, two nodes");
    runAutoAlltoallv(**twoNodes, testing::countMatrix(Spread::kAllEqual, 8, 3, 1000), strided,
                     testing::denseSide(strided.type, 1), 3, "pairwise", "48 KB strided, two nodes");
  });
}

// Rank 0 sends 64 KiB to every rank, the others 1 byte: each rank alone
// would choose differently (rank 0 sees only large blocks, rank 2 mostly
// tiny ones); the agreement makes them choose one algorithm.
TEST(AutoAlltoallv, RanksWhoseOwnCountsDifferWildlyChooseAlike) {
  for (int size : {4, 8}) {
    CountMatrix counts(static_cast<size_t>(size), std::vector<int64_t>(static_cast<size_t>(size), 1));
    std::fill(counts[0].begin(), counts[0].end(), 65536);
    CountMatrix few = counts;  // and the reverse: only rank 0 receives much
    for (int r = 0; r < size; ++r) few[static_cast<size_t>(r)] = std::vector<int64_t>(static_cast<size_t>(size), 2);
    for (int r = 1; r < size; ++r) few[static_cast<size_t>(r)][0] = 40000;
    runRanks(size, {}, [&](RankEnv& env) {
      auto comm = world(env);
      ASSERT_NE(comm, nullptr);
      const Side bytes = testing::byteSide(1);
      for (const CountMatrix* matrix : {&counts, &few}) {
        const AlltoallvAgreement agreed = expectedAgreement(*matrix, 1, true, uniformKind(bytes.type));
        runAutoAlltoallv(*comm, *matrix, bytes, bytes, 7, expectedName(agreed, size), "one heavy rank");
        if (::testing::Test::HasFatalFailure()) return;
      }
    });
  }
}

// The blocking call: on one node the communicator's mailbox (made by the
// first call, counted once), across nodes a plan per call, pairwise, with
// no allreduce; a build under a pinned tag (the MPI bridge's non-blocking
// calls) runs pairwise too. All are counted as auto's choices.
TEST(AutoAlltoallv, PerCallAndPinnedBuildsStayLocal) {
  runRanks(4, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    const Side bytes = testing::byteSide(1);
    const CountMatrix large = testing::countMatrix(Spread::kAllEqual, 4, 5, 65536);
    AlltoallvBuffers buffers(large, bytes, bytes, env.rank, 5);
    for (int call = 0; call < 2; ++call) {
      buffers.clearReceive();
      ASSERT_TRUE(alltoallv(*comm, buffers.sendbuf(), buffers.sendcounts(), buffers.sdispls(), bytes.type,
                            buffers.recvbuf(), buffers.recvcounts(), buffers.rdispls(), bytes.type, {}, soon())
                      .isOk());
      EXPECT_EQ(buffers.check(), "");
    }
    EXPECT_EQ(comm->algorithmCounts().at("alltoallv").at("mailbox"), (AlgorithmCount{1, 1}));
    auto twoNodes = Communicator::create(env.context, perf::simulatedNodes(4, 2),
                                           messaging::kFirstExchangeCommunicator + Communicator::kMaxSplitIds);
    ASSERT_TRUE(twoNodes.isOk()) << twoNodes.status().toString();
    buffers.clearReceive();
    ASSERT_TRUE(alltoallv(**twoNodes, buffers.sendbuf(), buffers.sendcounts(), buffers.sdispls(), bytes.type,
                          buffers.recvbuf(), buffers.recvcounts(), buffers.rdispls(), bytes.type, {}, soon())
                    .isOk());
    EXPECT_EQ(buffers.check(), "");
    EXPECT_EQ((*twoNodes)->algorithmCounts().at("alltoallv").at("pairwise"), (AlgorithmCount{1, 1}));
    comm->pinPlanTag(Communicator::kFirstReservedPlanTag);
    auto plan = alltoallvInit(*comm, buffers.sendbuf(), buffers.sendcounts(), buffers.sdispls(), bytes.type,
                              buffers.recvbuf(), buffers.recvcounts(), buffers.rdispls(), bytes.type);
    comm->unpinPlanTag();
    ASSERT_TRUE(plan.isOk()) << plan.status().toString();
    EXPECT_EQ(plan->algorithm(), "pairwise");
    buffers.clearReceive();
    ASSERT_TRUE(plan->start().isOk());
    ASSERT_TRUE(plan->wait(soon()).isOk());
    EXPECT_EQ(buffers.check(), "");
    EXPECT_EQ(comm->algorithmCounts().at("alltoallv").at("pairwise"), (AlgorithmCount{1, 1}));
  });
}

// A rank whose arguments fail still takes part in the agreement: every rank
// fails, none waits.
TEST(AutoAlltoallv, ARefusedRankFailsEveryRank) {
  runRanks(4, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    const Datatype byte = Datatype::of<uint8_t>();
    std::vector<uint8_t> a(64, 1), b(64, 0);
    std::vector<int64_t> counts(4, 4), displs = {0, 4, 8, 12};
    if (env.rank == 2) counts[1] = -1;
    auto plan = alltoallvInit(*comm, a.data(), counts, displs, byte, b.data(), std::vector<int64_t>(4, 4), displs,
                              byte);
    ASSERT_FALSE(plan.isOk());
    EXPECT_NE(plan.status().toString().find(env.rank == 2 ? "negative send count" : "arguments were refused"),
              std::string::npos)
        << plan.status().toString();
  });
}

// alltoall: 80000-byte blocks pick the shared-memory alltoall in
// alltoallInit (every rank builds it together) on one node at 2, 3 and 4
// ranks, direct-write when each rank is on a node of its own, and pairwise
// in the blocking call (the built-in model has no measured init to price
// either per call; with a file, alltoall_select_test.cc); every byte
// checked over three runs, the choices counted.
TEST(AutoAlltoall, PicksACollectiveInitAlgorithmForLargeBlocks) {
  for (int size : {2, 3, 4}) {
    for (bool nodeEach : {false, true}) {
      if (nodeEach && size > 2) continue;  // more nodes than 2 with 1 rank each: the same choice
      runRanks(size, {}, [&](RankEnv& env) {
        std::vector<NodeInfo> nodes;
        for (int r = 0; nodeEach && r < size; ++r) nodes.push_back({r, 0});
        auto created = Communicator::create(env.context, nodes);
        ASSERT_TRUE(created.isOk()) << created.status().toString();
        Communicator& comm = **created;
        const std::string expected = nodeEach ? "direct-write" : "shared-memory";
        const Side side = testing::byteSide(80000);
        AlltoallBuffers buffers(side, side, comm.size(), comm.rank());
        auto plan = alltoallInit(comm, buffers.sendbuf(), side.count, side.type, buffers.recvbuf(), side.count,
                                 side.type);
        ASSERT_TRUE(plan.isOk()) << plan.status().toString();
        EXPECT_EQ(plan->algorithm(), expected);
        for (int run = 0; run < 3; ++run) {
          ASSERT_EQ(testing::runChecked(*plan, buffers, run, soon()), "") << "rank " << env.rank << " run " << run;
        }
        buffers.clearReceive();
        ASSERT_TRUE(
            alltoall(comm, buffers.sendbuf(), side.count, side.type, buffers.recvbuf(), side.count, side.type, {}, soon())
                .isOk());
        EXPECT_EQ(buffers.check(), "");
        const auto& counts = comm.algorithmCounts().at("alltoall");
        EXPECT_EQ(counts.at(expected), (AlgorithmCount{1, 1}));
        EXPECT_EQ(counts.at("pairwise"), (AlgorithmCount{1, 1}));
        EXPECT_EQ(describe(comm.algorithmCounts()),
                  nodeEach ? "alltoall: direct-write 1 (auto 1), pairwise 1 (auto 1)"
                           : "alltoall: pairwise 1 (auto 1), shared-memory 1 (auto 1)");
      });
    }
  }
}

// Small blocks and in place never choose direct-write; forced algorithms
// are counted as not chosen by auto.
TEST(AutoAlltoall, SmallBlocksAndInPlaceStayOffDirectWrite) {
  runRanks(3, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    const Side small = testing::byteSide(8);
    AlltoallBuffers buffers(small, small, 3, env.rank);
    auto plan = alltoallInit(*comm, buffers.sendbuf(), 8, small.type, buffers.recvbuf(), 8, small.type);
    ASSERT_TRUE(plan.isOk());
    EXPECT_NE(plan->algorithm(), "direct-write");
    std::vector<uint8_t> one(3 * 80000, 5);
    auto inPlace = alltoallInit(*comm, kInPlace, 0, Datatype(), one.data(), 80000, small.type);
    ASSERT_TRUE(inPlace.isOk()) << inPlace.status().toString();
    EXPECT_NE(inPlace->algorithm(), "direct-write");
    AlltoallOptions forced;
    forced.algorithm = AlltoallAlgorithm::kPairwise;
    ASSERT_TRUE(alltoallInit(*comm, buffers.sendbuf(), 8, small.type, buffers.recvbuf(), 8, small.type, forced).isOk());
    EXPECT_EQ(comm->algorithmCounts().at("alltoall").at("pairwise").plans -
                  comm->algorithmCounts().at("alltoall").at("pairwise").chosenByAuto,
              1u);
  });
}

// IBDT_STATS=1: each communicator prints its counts when it goes away.
TEST(AlgorithmCounts, PrintedWhenTheCommunicatorGoesAwayUnderIbdtStats) {
  test::ScopedEnv stats("IBDT_STATS", "1");
  ::testing::internal::CaptureStderr();
  runRanks(2, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    const Side side = testing::byteSide(65536);
    AlltoallBuffers buffers(side, side, 2, env.rank);
    ASSERT_TRUE(
        alltoallInit(*comm, buffers.sendbuf(), side.count, side.type, buffers.recvbuf(), side.count, side.type).isOk());
  });
  const std::string printed = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(printed.find("rank 0 of 2): alltoall: shared-memory 1 (auto 1)"), std::string::npos) << printed;
  EXPECT_NE(printed.find("rank 1 of 2): alltoall: shared-memory 1 (auto 1)"), std::string::npos) << printed;
}

}  // namespace
}  // namespace ibdt::collectives
