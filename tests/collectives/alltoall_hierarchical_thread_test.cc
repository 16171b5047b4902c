// Hierarchical alltoall with ranks as threads over the loopback fabric, on
// simulated node maps (one node, two and three in blocks, uneven, and
// interleaved), p in {1, 2, 3, 4, 5, 7, 8}, and three leader set-ups (1
// leader per node exchanging directly one node pair at a time, 2 leaders
// exchanging directly all at once, 1 leader by Bruck): every byte of every
// receive buffer checked (gaps and guards included) for blocks of 0, 1, 13,
// 1000 and 80000 bytes and strided send and receive types, in place (13
// and 80000 bytes, strided) and not; persistent plans restarted with changing data; contiguous
// blocks on nodes in blocks staged nowhere; bad or mismatched arguments on one rank fail init on
// every rank. Each shape runs twice: two-sided below the messaging layer's
// rendezvous size (as built) and the one-sided relay from 1 byte up
// (exchangeZeroCopyMin = 1); relay plans restarted with no barrier between
// runs (a leader's G and the receive buffers reused at once), and at p = 8
// on 2 and 3 nodes with the default threshold, derived types and in place.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "collectives/alltoall_data.h"
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
using testing::hierarchical;
using testing::Side;

enum class Layout { kOneNode, kTwoBlocks, kThreeBlocks, kThreeInterleaved };

// Node of every rank: blocks (lower nodes take the extra ranks, as ibdt-run
// --nodes does) or round robin.
std::vector<NodeInfo> nodeMap(int size, Layout layout) {
  const int nodes = std::min(size, layout == Layout::kOneNode ? 1 : layout == Layout::kTwoBlocks ? 2 : 3);
  std::vector<NodeInfo> map;
  std::vector<int> seen(static_cast<size_t>(nodes), 0);
  for (int r = 0; r < size; ++r) {
    int node = r % nodes;
    if (layout != Layout::kThreeInterleaved) {
      const int base = size / nodes, extra = size % nodes;
      node = r < extra * (base + 1) ? r / (base + 1) : extra + (r - extra * (base + 1)) / base;
    }
    map.push_back({node, seen[static_cast<size_t>(node)]++});
  }
  return map;
}

// One plan, started twice with different data, checked each time; in
// place, `recv` is both sides.
void exchangeAndCheck(Communicator& comm, RankEnv& env, const Side& send, const Side& recv,
                      const AlltoallOptions& options, bool inPlace = false) {
  AlltoallBuffers buffers(inPlace ? recv : send, recv, comm.size(), comm.rank());
  auto plan = inPlace ? alltoallInit(comm, kInPlace, 0, Datatype(), buffers.recvbuf(), recv.count, recv.type, options)
                      : alltoallInit(comm, buffers.sendbuf(), send.count, send.type, buffers.recvbuf(), recv.count,
                                     recv.type, options);
  ASSERT_TRUE(plan.isOk()) << plan.status().toString();
  EXPECT_EQ(plan->algorithm(), "hierarchical");
  if (options.leaderExchange == LeaderExchange::kDirect) {  // in place or not: p blocks staged each way, and
    // at a leader, the node-blocks each way (docs/alltoall-hierarchical.md)
    EXPECT_LE(plan->peakExtraBytes(), 2 * comm.size() * recv.bytes() * (1 + comm.localSize()));
  }
  for (int run = 0; run < 2; ++run) {
    const std::string wrong = inPlace ? testing::runInPlaceChecked(*plan, buffers, run, soon())
                                      : testing::runChecked(*plan, buffers, run, soon());
    ASSERT_EQ(wrong, "") << "run " << run << ", " << recv.bytes() << " bytes, leaders " << options.leaders << ", "
                         << leaderExchangeName(options.leaderExchange) << ", throttle " << options.throttle
                         << (inPlace ? ", in place" : "");
    env.barrier();  // nobody refills its buffers while a peer's run still runs
  }
}

struct Shape {
  int ranks;
  Layout layout;
  bool oneSided;  // every nonempty node-local hop by writes
};

// Messaging options under which the node-local hops of a plan go one-sided
// (the agreement's vote: a chunk that would take the rendezvous).
messaging::Options hopsBy(bool oneSided) {
  messaging::Options options;
  options.exchangeZeroCopyMin = oneSided ? 1 : 0;  // 0: never single-copy, so never one-sided
  return options;
}

class HierarchicalThreads : public ::testing::TestWithParam<Shape> {};

TEST_P(HierarchicalThreads, EveryBlockSizeContiguousAndStrided) {
  const Shape shape = GetParam();
  runRanks(shape.ranks, hopsBy(shape.oneSided), [&](RankEnv& env) {
    auto comm = Communicator::create(env.context, nodeMap(shape.ranks, shape.layout));
    ASSERT_TRUE(comm.isOk()) << comm.status().toString();
    // One node pair at a time (throttle 1: as many exchange stages as
    // partner nodes), all at once with 2 leaders, and Bruck: each shape
    // runs two of the three, rotating with p and the layout, so that every
    // p and every layout meets all three (and the suite stays short).
    const AlltoallOptions setups[] = {hierarchical(1, LeaderExchange::kDirect, 1),
                                      hierarchical(2, LeaderExchange::kDirect, 0),
                                      hierarchical(1, LeaderExchange::kBruck)};
    const int first = (shape.ranks + static_cast<int>(shape.layout)) % 3;
    for (const AlltoallOptions& options : {setups[first], setups[(first + 1) % 3]}) {
      for (int64_t bytes : {0, 1, 13, 1000, 80000}) {
        const Side side = testing::byteSide(bytes);
        exchangeAndCheck(**comm, env, side, side, options);
        if (bytes == 13 || bytes == 80000) exchangeAndCheck(**comm, env, side, side, options, /*inPlace=*/true);
        if (::testing::Test::HasFatalFailure()) return;
      }
      for (int64_t vectors : {0, 21}) {  // 48 bytes each, in gaps of a strided type
        Side strided = testing::vectorSide(vectors);
        Side dense = testing::denseSide(strided.type, vectors);
        exchangeAndCheck(**comm, env, strided, dense, options);
        exchangeAndCheck(**comm, env, dense, strided, options);
        if (vectors > 0) exchangeAndCheck(**comm, env, strided, strided, options, /*inPlace=*/true);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  });
}

std::vector<Shape> shapes() {
  std::vector<Shape> out;
  for (int ranks : {1, 2, 3, 4, 5, 7, 8}) {
    for (Layout layout : {Layout::kOneNode, Layout::kTwoBlocks, Layout::kThreeBlocks, Layout::kThreeInterleaved}) {
      if (ranks < 3 && layout >= Layout::kThreeBlocks) continue;  // the same maps as fewer nodes
      if (ranks == 1 && layout != Layout::kOneNode) continue;
      for (bool oneSided : {false, true}) out.push_back({ranks, layout, oneSided});
    }
  }
  return out;
}

std::string shapeName(const ::testing::TestParamInfo<Shape>& info) {
  static const char* const kLayouts[] = {"one_node", "two_nodes", "three_nodes", "three_interleaved"};
  return "np" + std::to_string(info.param.ranks) + "_" + kLayouts[static_cast<int>(info.param.layout)] +
         (info.param.oneSided ? "_one_sided" : "_two_sided");
}

INSTANTIATE_TEST_SUITE_P(Shapes, HierarchicalThreads, ::testing::ValuesIn(shapes()), shapeName);

// Random derived send types (the same seed on every rank), received dense.
TEST(HierarchicalThreadsRandom, RandomDerivedSendTypes) {
  runRanks(5, {}, [&](RankEnv& env) {
    auto comm = Communicator::create(env.context, nodeMap(5, Layout::kTwoBlocks));
    ASSERT_TRUE(comm.isOk());
    datatype::testing::TypeGenerator generator(99);
    int tried = 0;
    for (int round = 0; tried < 8 && round < 200; ++round) {
      auto random = generator.make(3, 600);
      if (!random.type.valid() || !random.type.commit().isOk()) continue;
      const int64_t count = 1 + round % 3;
      SCOPED_TRACE(random.description);
      exchangeAndCheck(**comm, env, testing::sideOf(random.type, random.ref, count),
                       testing::denseSide(random.type, count),
                       round % 3 == 0 ? hierarchical(1, LeaderExchange::kBruck) : hierarchical(1 + round % 2));
      ++tried;
    }
    EXPECT_EQ(tried, 8);
  });
}

// The value of byte k of the block `from` sends `to` in run `run`.
uint8_t runPattern(int run, int from, int to, int64_t k) {
  return static_cast<uint8_t>(testing::pattern(from, to, k) + run * 29);
}

// Run `run`'s blocks of `rank` into `send` (p blocks of `block` bytes).
void fillRun(std::vector<uint8_t>& send, int run, int rank, int ranks, int64_t block) {
  for (int to = 0; to < ranks; ++to) {
    for (int64_t k = 0; k < block; ++k) send[static_cast<size_t>(to * block + k)] = runPattern(run, rank, to, k);
  }
}

// The first byte of `recv` that is not run `run`'s, described; "" if none.
std::string wrongInRun(const std::vector<uint8_t>& recv, int run, int rank, int ranks, int64_t block) {
  for (int from = 0; from < ranks; ++from) {
    for (int64_t k = 0; k < block; ++k) {
      const uint8_t got = recv[static_cast<size_t>(from * block + k)];
      if (got != runPattern(run, from, rank, k)) {
        return "run " + std::to_string(run) + " from " + std::to_string(from) + " byte " + std::to_string(k) +
               ": got " + std::to_string(got) + ", expected " + std::to_string(runPattern(run, from, rank, k));
      }
    }
  }
  return "";
}

// A persistent plan started many times, the send buffer rewritten before
// each run: every run must deliver that run's data.
TEST(HierarchicalThreadsPlan, RestartedWithChangingData) {
  constexpr int kRanks = 7;
  constexpr int64_t kBlock = 100;
  runRanks(kRanks, {}, [&](RankEnv& env) {
    auto comm = Communicator::create(env.context, nodeMap(kRanks, Layout::kThreeBlocks));
    ASSERT_TRUE(comm.isOk());
    std::vector<uint8_t> send(kRanks * kBlock), recv(kRanks * kBlock);
    const Datatype byte = Datatype::basic(datatype::BasicKind::kByte);
    for (const AlltoallOptions& options : {hierarchical(2), hierarchical(1, LeaderExchange::kBruck)}) {
      auto plan = alltoallInit(**comm, send.data(), kBlock, byte, recv.data(), kBlock, byte, options);
      ASSERT_TRUE(plan.isOk()) << plan.status().toString();
      for (int run = 0; run < 10; ++run) {
        fillRun(send, run, env.rank, kRanks, kBlock);
        ASSERT_TRUE(plan->start().isOk());
        EXPECT_EQ(plan->start().code(), Code::kState);  // still active
        ASSERT_TRUE(plan->wait(soon()).isOk());
        ASSERT_EQ(wrongInRun(recv, run, env.rank, kRanks, kBlock), "");
        env.barrier();  // nobody rewrites its send buffer while a peer's run may still read it
      }
    }
  });
}

// The relay restarted with no barrier between runs: a rank writes into a
// leader's G and into its destinations' receive buffers (the user's) as
// soon as each target's ready for the run arrived, so a fast rank's next
// run meets targets still finishing this one; every run must still deliver
// its own data. 7 ranks on 3 nodes, 8 on 2 and on 3 (3, 3, 2).
void restartWithoutBarrier(int ranks, Layout layout) {
  constexpr int64_t kBlock = 100;
  runRanks(ranks, hopsBy(true), [&](RankEnv& env) {
    auto comm = Communicator::create(env.context, nodeMap(ranks, layout));
    ASSERT_TRUE(comm.isOk());
    std::vector<uint8_t> send(static_cast<size_t>(ranks) * kBlock), recv(static_cast<size_t>(ranks) * kBlock);
    const Datatype byte = Datatype::basic(datatype::BasicKind::kByte);
    for (const AlltoallOptions& options : {hierarchical(1, LeaderExchange::kDirect, 1), hierarchical(2)}) {
      auto plan = alltoallInit(**comm, send.data(), kBlock, byte, recv.data(), kBlock, byte, options);
      ASSERT_TRUE(plan.isOk()) << plan.status().toString();
      for (int run = 0; run < 20; ++run) {
        fillRun(send, run, env.rank, ranks, kBlock);
        std::fill(recv.begin(), recv.end(), uint8_t{0});
        ASSERT_TRUE(plan->start().isOk());
        ASSERT_TRUE(plan->wait(soon()).isOk());
        ASSERT_EQ(wrongInRun(recv, run, env.rank, ranks, kBlock), "") << "leaders " << options.leaders;
      }
      env.barrier();  // the next plan's init
    }
  });
}

TEST(HierarchicalThreadsPlan, OneSidedRestartedWithoutBarrier) {
  for (auto [ranks, layout] :
       {std::pair{7, Layout::kThreeBlocks}, std::pair{8, Layout::kTwoBlocks}, std::pair{8, Layout::kThreeBlocks}}) {
    restartWithoutBarrier(ranks, layout);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// Which path a plan took shows in a leader's buffers: two-sided, G and E
// (the blocks that stay on the node are G's and E's at once: 8 + 4 blocks);
// the relay, only G, [remote destination][source]: 2 x 2 blocks. p = 4 on 2
// nodes of 2, 1000-byte blocks; a member stages nothing either way.
TEST(HierarchicalThreadsPlan, TheRelayFromTheRendezvousSize) {
  constexpr int kRanks = 4;
  constexpr int64_t kBytes = 1000;
  for (bool oneSided : {false, true}) {
    runRanks(kRanks, hopsBy(oneSided), [&](RankEnv& env) {
      auto comm = Communicator::create(env.context, nodeMap(kRanks, Layout::kTwoBlocks));
      ASSERT_TRUE(comm.isOk()) << comm.status().toString();
      const Side dense = testing::byteSide(kBytes);
      AlltoallBuffers buffers(dense, dense, kRanks, env.rank);
      auto plan = alltoallInit(**comm, buffers.sendbuf(), dense.count, dense.type, buffers.recvbuf(), dense.count,
                               dense.type, hierarchical(1, LeaderExchange::kDirect));
      ASSERT_TRUE(plan.isOk()) << plan.status().toString();
      const bool leader = (*comm)->node(env.rank).localRank == 0;
      EXPECT_EQ(plan->peakExtraBytes(), leader ? (oneSided ? 4 : 12) * kBytes : 0) << "rank " << env.rank;
      for (int run = 0; run < 3; ++run) {
        ASSERT_EQ(testing::runChecked(*plan, buffers, run, soon()), "") << "rank " << env.rank << ", run " << run;
        env.barrier();
      }
    });
  }
}

// The relay at the benchmark's shape and beyond, with the messaging
// layer's default threshold (8200-byte blocks: a chunk of p blocks, 64.1
// KiB, takes the single copy): p = 8 on 2 nodes of 4 and on 3 nodes of 3, 3, 2, with
// 1 and 2 leaders; contiguous (a leader's only buffer is G: 16 blocks on 2
// nodes with 1 leader), strided to dense and dense to strided (derived
// types staged and unpacked), in place contiguous and strided; each plan
// started 4 times with new data, every byte checked.
TEST(HierarchicalThreadsPlan, TheRelayAtEightRanks) {
  constexpr int kRanks = 8;
  constexpr int64_t kBytes = 8200;
  for (Layout layout : {Layout::kTwoBlocks, Layout::kThreeBlocks}) {
    runRanks(kRanks, {}, [&](RankEnv& env) {
      auto comm = Communicator::create(env.context, nodeMap(kRanks, layout));
      ASSERT_TRUE(comm.isOk()) << comm.status().toString();
      const Side dense = testing::byteSide(kBytes);
      const Side strided = testing::vectorSide(kBytes / 48 + 1);  // 48 bytes each: 8208, a chunk past 64 KiB too
      const Side stridedDense = testing::denseSide(strided.type, strided.count);
      struct Sides {
        const Side &send, &recv;
        bool inPlace;
      };
      const Sides sides[] = {{dense, dense, false},
                             {strided, stridedDense, false},
                             {stridedDense, strided, false},
                             {dense, dense, true},
                             {strided, strided, true}};
      for (int leaders : {1, 2}) {
        for (const Sides& c : sides) {
          AlltoallBuffers buffers(c.inPlace ? c.recv : c.send, c.recv, kRanks, env.rank);
          auto plan = c.inPlace
                          ? alltoallInit(**comm, kInPlace, 0, Datatype(), buffers.recvbuf(), c.recv.count, c.recv.type,
                                         hierarchical(leaders, LeaderExchange::kDirect))
                          : alltoallInit(**comm, buffers.sendbuf(), c.send.count, c.send.type, buffers.recvbuf(),
                                         c.recv.count, c.recv.type, hierarchical(leaders, LeaderExchange::kDirect));
          ASSERT_TRUE(plan.isOk()) << plan.status().toString();
          const bool leader = (*comm)->node(env.rank).localRank < leaders;
          if (layout == Layout::kTwoBlocks && leaders == 1 && &c.send == &dense && !c.inPlace) {
            EXPECT_EQ(plan->peakExtraBytes(), leader ? 16 * kBytes : 0) << "rank " << env.rank;
          }
          for (int run = 0; run < 4; ++run) {
            const std::string wrong = c.inPlace ? testing::runInPlaceChecked(*plan, buffers, run, soon())
                                                : testing::runChecked(*plan, buffers, run, soon());
            ASSERT_EQ(wrong, "") << "rank " << env.rank << ", run " << run << ", leaders " << leaders
                                 << (c.inPlace ? ", in place" : "") << ", " << c.send.bytes() << " bytes";
            env.barrier();  // nobody refills its buffers while a peer's run still runs
          }
        }
      }
    });
  }
}

// One rank's bad or different arguments fail init on every rank, at once.
// Contiguous blocks on nodes in blocks with one leader: every chunk and row
// is a dense run of the user's buffers, so a rank that is not a leader
// stages nothing and a leader only its G and E; strided, or interleaved
// nodes, stage p blocks each way (Stages 0 and 3 of
// docs/alltoall-hierarchical.md). Every byte checked.
TEST(HierarchicalThreadsPlan, DenseRunsNeedNoStaging) {
  constexpr int kRanks = 6;
  constexpr int64_t kBytes = 1000;
  for (Layout layout : {Layout::kTwoBlocks, Layout::kThreeInterleaved}) {
    runRanks(kRanks, {}, [&](RankEnv& env) {
      auto comm = Communicator::create(env.context, nodeMap(kRanks, layout));
      ASSERT_TRUE(comm.isOk()) << comm.status().toString();
      const bool leader = (*comm)->node(env.rank).localRank == 0;
      const int64_t leaderBuffers = 2 * (*comm)->localSize() * kRanks * kBytes;  // G and E, at most
      const Side dense = testing::byteSide(kBytes), strided = testing::vectorSide(kBytes / 48);
      AlltoallBuffers buffers(dense, dense, kRanks, env.rank);
      auto plan = alltoallInit(**comm, buffers.sendbuf(), dense.count, dense.type, buffers.recvbuf(), dense.count,
                               dense.type, hierarchical(1, LeaderExchange::kDirect));
      ASSERT_TRUE(plan.isOk()) << plan.status().toString();
      if (leader) {
        EXPECT_LE(plan->peakExtraBytes(), leaderBuffers) << "rank " << env.rank;
      } else {  // interleaved: a chunk's blocks are not consecutive, so staged both ways
        EXPECT_EQ(plan->peakExtraBytes(), layout == Layout::kTwoBlocks ? 0 : 2 * kRanks * kBytes)
            << "rank " << env.rank;
      }
      for (int run = 0; run < 2; ++run) {
        ASSERT_EQ(testing::runChecked(*plan, buffers, run, soon()), "") << "rank " << env.rank << ", run " << run;
        env.barrier();
      }
      const Side denseRecv = testing::denseSide(strided.type, strided.count);
      AlltoallBuffers stridedBuffers(strided, denseRecv, kRanks, env.rank);
      auto staged =
          alltoallInit(**comm, stridedBuffers.sendbuf(), strided.count, strided.type, stridedBuffers.recvbuf(),
                       denseRecv.count, denseRecv.type, hierarchical(1, LeaderExchange::kDirect));
      ASSERT_TRUE(staged.isOk()) << staged.status().toString();
      if (!leader) {  // a strided send is staged; its dense receive is not (on nodes in blocks)
        const int64_t bytes = strided.bytes();
        EXPECT_EQ(staged->peakExtraBytes(), (layout == Layout::kTwoBlocks ? 1 : 2) * kRanks * bytes)
            << "rank " << env.rank;
      }
      ASSERT_EQ(testing::runChecked(*staged, stridedBuffers, 0, soon()), "") << "rank " << env.rank;
      env.barrier();
    });
  }
}

TEST(HierarchicalThreadsErrors, ArgumentsThatDisagreeFailEveryRank) {
  runRanks(4, {}, [&](RankEnv& env) {
    auto comm = Communicator::create(env.context, nodeMap(4, Layout::kTwoBlocks));
    ASSERT_TRUE(comm.isOk());
    std::vector<uint8_t> a(4 * 64), b(4 * 64);
    const Datatype byte = Datatype::basic(datatype::BasicKind::kByte);
    auto expectError = [&](Result<Plan> plan, const char* words) {
      ASSERT_FALSE(plan.isOk()) << "rank " << env.rank;
      EXPECT_EQ(plan.status().code(), Code::kInvalidArgument) << plan.status().toString();
      EXPECT_NE(plan.status().toString().find(words), std::string::npos) << plan.status().toString();
    };
    const int64_t count = env.rank == 2 ? 8 : 16;  // rank 2 sends fewer bytes
    expectError(alltoallInit(**comm, a.data(), count, byte, b.data(), count, byte, hierarchical(1)), "match");
    const int64_t bad = env.rank == 1 ? -1 : 16;  // rank 1 refuses its own arguments
    expectError(alltoallInit(**comm, a.data(), bad, byte, b.data(), bad, byte, hierarchical(1)),
                env.rank == 1 ? "negative" : "rank 1 refused");
    expectError(alltoallInit(**comm, a.data(), 16, byte, b.data(), 16, byte, hierarchical(env.rank == 3 ? 2 : 1)),
                "leaders per node");
    expectError(alltoallInit(**comm, a.data(), 16, byte, b.data(), 16, byte, hierarchical(0)), "leaders");
    const LeaderExchange exchange = env.rank == 1 ? LeaderExchange::kBruck : LeaderExchange::kDirect;
    expectError(alltoallInit(**comm, a.data(), 16, byte, b.data(), 16, byte, hierarchical(1, exchange)),
                "leader exchange");
    expectError(alltoallInit(**comm, a.data(), 16, byte, b.data(), 16, byte, hierarchical(2, LeaderExchange::kBruck)),
                "one leader per node");
    // In place with Bruck between the leaders: rank 3 sends fewer bytes.
    expectError(alltoallInit(**comm, kInPlace, 0, Datatype(), b.data(), env.rank == 3 ? 8 : 16, byte,
                             hierarchical(1, LeaderExchange::kBruck)),
                "match");
    // Same bytes, different basic types on rank 0: the signatures differ.
    const Datatype type = env.rank == 0 ? Datatype::of<int32_t>() : Datatype::of<float>();
    expectError(alltoallInit(**comm, a.data(), 4, type, b.data(), 4, type, hierarchical(1)), "match");
    EXPECT_EQ(b, std::vector<uint8_t>(4 * 64, 0));  // nothing was written
  });
}

TEST(HierarchicalOptions, LeaderExchangeKnobIsReadAndBadValuesNameIt) {
  for (auto [value, expected] :
       {std::pair{"direct", LeaderExchange::kDirect}, std::pair{"bruck", LeaderExchange::kBruck},
        std::pair{"auto", LeaderExchange::kAuto}}) {
    test::ScopedEnv env("IBDT_ALLTOALL_LEADER_EXCHANGE", value);
    auto options = alltoallOptionsFromEnvironment();
    ASSERT_TRUE(options.isOk()) << options.status().toString();
    EXPECT_EQ(options->leaderExchange, expected);
    EXPECT_EQ(leaderExchangeName(expected), value);
  }
  test::ScopedEnv env("IBDT_ALLTOALL_LEADER_EXCHANGE", "ring");
  auto options = alltoallOptionsFromEnvironment();
  ASSERT_FALSE(options.isOk());
  EXPECT_NE(options.status().toString().find("IBDT_ALLTOALL_LEADER_EXCHANGE"), std::string::npos);
  EXPECT_EQ(AlltoallOptions{}.leaderExchange, LeaderExchange::kAuto);
}

TEST(HierarchicalOptions, LeadersKnobIsReadAndBadValuesNameIt) {
  {
    test::ScopedEnv env("IBDT_ALLTOALL_LEADERS", "3");
    auto options = alltoallOptionsFromEnvironment();
    ASSERT_TRUE(options.isOk()) << options.status().toString();
    EXPECT_EQ(options->leaders, 3);
  }
  for (const char* bad : {"0", "-2", "two"}) {
    test::ScopedEnv env("IBDT_ALLTOALL_LEADERS", bad);
    auto options = alltoallOptionsFromEnvironment();
    ASSERT_FALSE(options.isOk()) << bad;
    EXPECT_NE(options.status().toString().find("IBDT_ALLTOALL_LEADERS"), std::string::npos);
  }
  auto defaults = alltoallOptionsFromEnvironment();
  ASSERT_TRUE(defaults.isOk());
  EXPECT_EQ(defaults->leaders, AlltoallOptions{}.leaders);
}

}  // namespace
}  // namespace ibdt::collectives
