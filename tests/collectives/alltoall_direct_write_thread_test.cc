// The direct-write alltoall (docs/alltoall-direct-writes.md) and the
// one-sided puts under it, with ranks as threads over the loopback fabric:
// every byte of every receive buffer (gaps and guards included) checked for
// p in {1, 2, 3, 4, 5, 8} and blocks of 0 B .. 1 MiB, persistent plans
// restarted with new data and no barrier between runs, the fallback for
// derived types, the in-place refusal, point-to-point traffic during a run,
// a dead rank, and the puts' bad arguments.
#include <gtest/gtest.h>

#include <barrier>
#include <cstring>
#include <thread>

#include "collectives/alltoall_data.h"
#include "collectives/alltoall_select.h"
#include "collectives/alltoallv_data.h"
#include "collectives/world.h"
#include "ibdt/collectives.h"
#include "support/thread_ranks.h"

namespace ibdt::collectives {
namespace {

using datatype::Datatype;
using messaging::testing::RankEnv;
using messaging::testing::runRanks;
using messaging::testing::soon;
using testing::AlltoallBuffers;
using testing::Side;

AlltoallOptions directWrite() {
  AlltoallOptions options;
  options.algorithm = AlltoallAlgorithm::kDirectWrite;
  return options;
}

using testing::world;

// A persistent plan run `runs` times, the send data changing every run;
// no barrier between runs: a peer writes into this rank's buffer only
// after this rank's run said it is ready.
void runPersistent(RankEnv& env, const Side& side, int runs, std::string_view expected) {
  auto comm = world(env);
  ASSERT_NE(comm, nullptr);
  AlltoallBuffers buffers(side, side, comm->size(), comm->rank());
  auto plan = alltoallInit(*comm, buffers.sendbuf(), side.count, side.type, buffers.recvbuf(), side.count, side.type,
                           directWrite());
  ASSERT_TRUE(plan.isOk()) << plan.status().toString();
  EXPECT_EQ(plan->algorithm(), expected);
  for (int run = 0; run < runs; ++run) {
    ASSERT_EQ(testing::runChecked(*plan, buffers, run, soon()), "")
        << "rank " << env.rank << " run " << run << " of " << side.bytes() << " B";
  }
}

class DirectWriteThreads : public ::testing::TestWithParam<int> {};

TEST_P(DirectWriteThreads, EveryBlockSizePersistentWithChangingData) {
  const int ranks = GetParam();
  for (int64_t bytes : {int64_t{0}, int64_t{1}, int64_t{13}, int64_t{80000}, int64_t{1} << 20}) {
    // Threads checking p MiB byte by byte each take minutes on 2 cores under
    // ASan: 1 MiB blocks up to 3 ranks (the mp test covers 4 processes).
    if (ranks > 3 && bytes > 80000) continue;
    runRanks(ranks, {}, [&](RankEnv& env) { runPersistent(env, testing::byteSide(bytes), 3, "direct-write"); });
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, DirectWriteThreads, ::testing::Values(1, 2, 3, 4, 5, 8));

TEST(DirectWriteThreadsBlocking, BlockingCallsReRegisterNothingAndMatch) {
  runRanks(3, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    const Side side = testing::byteSide(70000);
    AlltoallBuffers buffers(side, side, 3, env.rank);
    for (int run = 0; run < 3; ++run) {
      buffers.refill(run);
      buffers.clearReceive();
      Status status = alltoall(*comm, buffers.sendbuf(), side.count, side.type, buffers.recvbuf(), side.count,
                               side.type, directWrite(), soon());
      ASSERT_TRUE(status.isOk()) << status.toString();
      EXPECT_EQ(buffers.check(), "") << "run " << run;
      env.barrier();  // a blocking call's plan goes away: the next one's keys are new
    }
  });
}

// Plan::rebind: each rank moves its send and receive buffers between two
// sets on its own schedule, telling nobody (no barrier, no agreement); the
// peers' writes follow the key in its next ready. Every byte checked. The
// shared-memory plan moves alike (its peers never see its buffers), which
// the MPI bridge's per-size plans rely on.
TEST(DirectWriteThreadsRebind, EachRankMovesItsBuffersAlone) {
  AlltoallOptions sharedMemory;
  sharedMemory.algorithm = AlltoallAlgorithm::kSharedMemory;
  for (const AlltoallOptions& options : {directWrite(), sharedMemory}) {
    for (int64_t bytes : {int64_t{0}, int64_t{13}, int64_t{70000}}) {
      runRanks(4, {}, [&](RankEnv& env) {
        auto comm = world(env);
        ASSERT_NE(comm, nullptr);
        const Side side = testing::byteSide(bytes);
        AlltoallBuffers sets[2] = {AlltoallBuffers(side, side, 4, env.rank), AlltoallBuffers(side, side, 4, env.rank)};
        auto plan = alltoallInit(*comm, sets[0].sendbuf(), side.count, side.type, sets[0].recvbuf(), side.count,
                                 side.type, options);
        ASSERT_TRUE(plan.isOk()) << plan.status().toString();
        ASSERT_EQ(plan->algorithm(), alltoallAlgorithmName(options.algorithm));
        for (int run = 0; run < 8; ++run) {
          ASSERT_EQ(testing::runRebound(*plan, sets, env.rank, run, soon()), "")
              << "rank " << env.rank << " run " << run << " of " << bytes << " B";
        }
      });
    }
  }
}

// Plan::rebind with types: a shared-memory plan built for bytes takes each
// rank's own types and buffers run by run (the MPI bridge's per-size plans
// do, for the program's derived types), the ranks changing at different
// runs, so in one run strided sends meet byte and strided receives; every
// byte, gap and guard checked. Other block sizes and in place are refused,
// as is a plan whose peers would have to know (direct-write), and the plan
// still runs after a refusal.
TEST(SharedMemoryThreadsRebindTypes, EachRankChangesItsTypesAlone) {
  AlltoallOptions sharedMemory;
  sharedMemory.algorithm = AlltoallAlgorithm::kSharedMemory;
  runRanks(4, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    const Side strided = testing::vectorSide(20);
    const Side dense = testing::denseSide(strided.type, 20);
    const Side bytes = testing::byteSide(strided.bytes());
    const Side layouts[3][2] = {{bytes, bytes}, {strided, dense}, {dense, strided}};
    AlltoallBuffers first(bytes, bytes, 4, env.rank);
    auto plan = alltoallInit(*comm, first.sendbuf(), bytes.count, bytes.type, first.recvbuf(), bytes.count, bytes.type,
                             sharedMemory);
    ASSERT_TRUE(plan.isOk()) << plan.status().toString();
    ASSERT_EQ(plan->algorithm(), "shared-memory");
    for (int run = 0; run < 9; ++run) {
      const Side* sides = layouts[(run / (env.rank + 1) + env.rank) % 3];
      AlltoallBuffers buffers(sides[0], sides[1], 4, env.rank);
      if (run == 4) {  // refused, nothing changed: the run below still uses its own rebind
        const Side more = testing::byteSide(strided.bytes() + 1);
        AlltoallBuffers wrong(more, more, 4, env.rank);
        EXPECT_EQ(plan->rebind(wrong.sendbuf(), more.count, more.type, wrong.recvbuf(), more.count, more.type).code(),
                  Code::kInvalidArgument);
        EXPECT_EQ(plan->rebind(kInPlace, 0, bytes.type, buffers.recvbuf(), bytes.count, bytes.type).code(),
                  Code::kInvalidArgument);
      }
      ASSERT_TRUE(plan->rebind(buffers.sendbuf(), sides[0].count, sides[0].type, buffers.recvbuf(), sides[1].count,
                               sides[1].type)
                      .isOk());
      ASSERT_EQ(testing::runChecked(*plan, buffers, run, soon()), "") << "rank " << env.rank << " run " << run;
    }
    auto written = alltoallInit(*comm, first.sendbuf(), bytes.count, bytes.type, first.recvbuf(), bytes.count,
                                bytes.type, directWrite());
    ASSERT_TRUE(written.isOk()) << written.status().toString();
    EXPECT_EQ(written->rebind(first.sendbuf(), bytes.count, bytes.type, first.recvbuf(), bytes.count, bytes.type).code(),
              Code::kUnsupported);
  });
}

// Strided blocks cannot be written as one run of bytes: every rank runs
// pairwise, and the data is still right.
TEST(DirectWriteThreadsFallback, DerivedTypesRunPairwise) {
  runRanks(4, {}, [&](RankEnv& env) {
    const Side strided = testing::vectorSide(300);
    runPersistent(env, strided, 2, "pairwise");
  });
}

// Auto picks direct-write by the block's bytes; where a rank's types are
// not dense blocks, every rank runs auto's choice without direct-write (on
// one node, the shared segment where the model prefers it), not pairwise,
// which was 1.15x the shared segment at 2 ranks of 64 KiB strided blocks
// on an Intel Xeon (family 6, model 207).
TEST(DirectWriteThreadsFallback, AutoWithDerivedTypesRunsItsNextChoice) {
  const AlltoallCostModel model = AlltoallCostModel::builtIn();
  int64_t bytes = 0;
  for (int64_t b = 48 * 64; b <= 48 * 65536 && bytes == 0; b *= 2) {
    if (selectAlltoall(model, 2, b, true, 1, false, false).algorithm == AlltoallAlgorithm::kDirectWrite) bytes = b;
  }
  ASSERT_GT(bytes, 0) << "the built-in model never picks direct-write for 2 ranks of one node";
  const std::string_view expected =
      alltoallAlgorithmName(selectAlltoall(model, 2, bytes, true, 1, false, true).algorithm);
  ASSERT_NE(expected, "direct-write");
  runRanks(2, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    const Side strided = testing::vectorSide(bytes / 48);  // 48 packed bytes per vector
    const Side dense = testing::denseSide(strided.type, bytes / 48);
    AlltoallBuffers buffers(strided, dense, 2, env.rank);
    auto plan = alltoallInit(*comm, buffers.sendbuf(), strided.count, strided.type, buffers.recvbuf(), dense.count,
                             dense.type);
    ASSERT_TRUE(plan.isOk()) << plan.status().toString();
    EXPECT_EQ(plan->algorithm(), expected) << bytes << " B per block";
    for (int run = 0; run < 2; ++run) {
      ASSERT_EQ(testing::runChecked(*plan, buffers, run, soon()), "") << "rank " << env.rank << " run " << run;
    }
  });
}

// One rank with a strided type is enough: they agree at init.
TEST(DirectWriteThreadsFallback, OneRankWithDerivedTypesMovesEveryRankToPairwise) {
  runRanks(3, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    const Side strided = testing::vectorSide(50);
    const Side dense = testing::denseSide(strided.type, 50);
    const Side& send = env.rank == 1 ? strided : dense;
    AlltoallBuffers buffers(send, dense, 3, env.rank);
    auto plan = alltoallInit(*comm, buffers.sendbuf(), send.count, send.type, buffers.recvbuf(), dense.count,
                             dense.type, directWrite());
    ASSERT_TRUE(plan.isOk()) << plan.status().toString();
    EXPECT_EQ(plan->algorithm(), "pairwise");
    // Only direct-write plans move to other buffers (Plan::rebind).
    EXPECT_EQ(plan->rebind(buffers.sendbuf(), buffers.recvbuf()).code(), Code::kUnsupported);
    ASSERT_TRUE(plan->start().isOk());
    ASSERT_TRUE(plan->wait(soon()).isOk());
    EXPECT_EQ(buffers.check(), "");
  });
}

TEST(DirectWriteThreadsErrors, InPlaceFailsOnEveryRank) {
  runRanks(3, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    const Side side = testing::byteSide(100);
    AlltoallBuffers buffers(side, side, 3, env.rank);
    auto plan = alltoallInit(*comm, kInPlace, 0, Datatype(), buffers.recvbuf(), side.count, side.type, directWrite());
    ASSERT_FALSE(plan.isOk());
    EXPECT_EQ(plan.status().code(), Code::kInvalidArgument);
    EXPECT_NE(plan.status().toString().find("kInPlace"), std::string::npos) << plan.status().toString();
  });
}

// A bad argument on one rank fails every rank's init (no rank waits for a key).
TEST(DirectWriteThreadsErrors, BadArgumentOnOneRankFailsEveryRank) {
  runRanks(3, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    const Side side = testing::byteSide(100);
    AlltoallBuffers buffers(side, side, 3, env.rank);
    const int64_t count = env.rank == 2 ? -1 : side.count;
    auto plan = alltoallInit(*comm, buffers.sendbuf(), count, side.type, buffers.recvbuf(), side.count, side.type,
                             directWrite());
    ASSERT_FALSE(plan.isOk()) << "rank " << env.rank;
    EXPECT_EQ(plan.status().code(), Code::kInvalidArgument) << plan.status().toString();
  });
}

// User messages on communicator 0 flow both ways while the plan runs; both
// arrive intact.
TEST(DirectWriteThreadsTraffic, PointToPointDuringARun) {
  runRanks(4, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    const Side side = testing::byteSide(200000);
    AlltoallBuffers buffers(side, side, 4, env.rank);
    auto plan = alltoallInit(*comm, buffers.sendbuf(), side.count, side.type, buffers.recvbuf(), side.count, side.type,
                             directWrite());
    ASSERT_TRUE(plan.isOk()) << plan.status().toString();
    const Datatype byte = Datatype::of<std::byte>();
    const int next = (env.rank + 1) % 4, previous = (env.rank + 3) % 4;
    for (int run = 0; run < 3; ++run) {
      std::vector<uint8_t> out(50000 + static_cast<size_t>(run)), in(out.size());
      for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(env.rank * 31 + run * 7 + i);
      buffers.refill(run);
      buffers.clearReceive();
      ASSERT_TRUE(plan->start().isOk());
      auto recv = env.context.irecv(in.data(), static_cast<int64_t>(in.size()), byte, previous, 5);
      auto send = env.context.isend(out.data(), static_cast<int64_t>(out.size()), byte, next, 5);
      ASSERT_TRUE(recv.isOk() && send.isOk());
      ASSERT_TRUE(plan->wait(soon()).isOk());
      ASSERT_TRUE(env.context.wait(*send, nullptr, soon()).isOk());
      ASSERT_TRUE(env.context.wait(*recv, nullptr, soon()).isOk());
      EXPECT_EQ(buffers.check(), "") << "run " << run;
      for (size_t i = 0; i < in.size(); ++i) {
        ASSERT_EQ(in[i], static_cast<uint8_t>(previous * 31 + run * 7 + i)) << "byte " << i << " run " << run;
      }
    }
  });
}

// Rank 3 builds its plan and then its Context goes away: every survivor's
// next run ends with an error (not the deadline).
TEST(DirectWriteThreadsErrors, DeadRankFailsEverySurvivor) {
  messaging::testing::Ranks ranks = messaging::testing::createRanks(4, {});
  for (auto& context : ranks.contexts) ASSERT_NE(context, nullptr);
  std::barrier meet(4);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 4; ++rank) {
    threads.emplace_back([&, rank] {
      auto comm = Communicator::create(*ranks.contexts[static_cast<size_t>(rank)]);
      ASSERT_TRUE(comm.isOk());
      const Side side = testing::byteSide(90000);
      AlltoallBuffers buffers(side, side, 4, rank);
      auto plan = alltoallInit(**comm, buffers.sendbuf(), side.count, side.type, buffers.recvbuf(), side.count,
                               side.type, directWrite());
      EXPECT_TRUE(plan.isOk()) << plan.status().toString();
      meet.arrive_and_wait();
      if (rank == 3) {
        *plan = Plan();
        comm->reset();
        ranks.contexts[3].reset();
        meet.arrive_and_drop();
        return;
      }
      meet.arrive_and_wait();
      ASSERT_TRUE(plan.isOk());
      Status status = plan->start();
      if (status.isOk()) status = plan->wait(Deadline::after(std::chrono::seconds(30)));
      ASSERT_FALSE(status.isOk()) << "rank " << rank;
      EXPECT_NE(status.code(), Code::kTimeout) << status.toString();
      EXPECT_NE(status.toString().find("rank 3"), std::string::npos) << status.toString();
    });
  }
  for (auto& thread : threads) thread.join();
}

// Alltoallv by direct writes: every spread of counts (zeros, one huge peer,
// all-to-one, ...), a persistent plan run three times.
class DirectWriteAlltoallvThreads : public ::testing::TestWithParam<int> {};

TEST_P(DirectWriteAlltoallvThreads, EverySpreadPersistent) {
  const int size = GetParam();
  AlltoallvOptions options;
  options.algorithm = AlltoallvAlgorithm::kDirectWrite;
  for (testing::Spread spread : testing::kSpreads) {
    runRanks(size, {}, [&](RankEnv& env) {
      auto comm = world(env);
      ASSERT_NE(comm, nullptr);
      const uint64_t seed = 40 + static_cast<uint64_t>(spread);
      const auto counts = testing::countMatrix(spread, size, seed, 5000);
      const Side bytes = testing::byteSide(1);
      testing::AlltoallvBuffers buffers(counts, bytes, bytes, env.rank, seed);
      auto plan = alltoallvInit(*comm, buffers.sendbuf(), buffers.sendcounts(), buffers.sdispls(), bytes.type,
                                buffers.recvbuf(), buffers.recvcounts(), buffers.rdispls(), bytes.type, options);
      ASSERT_TRUE(plan.isOk()) << plan.status().toString();
      EXPECT_EQ(plan->algorithm(), "direct-write");
      for (int run = 0; run < 3; ++run) {
        buffers.clearReceive();
        ASSERT_TRUE(plan->start().isOk());
        Status status = plan->wait(soon());
        ASSERT_TRUE(status.isOk()) << testing::spreadName(spread) << ": " << status.toString();
        EXPECT_EQ(buffers.check(), "") << testing::spreadName(spread) << " run " << run;
      }
    });
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, DirectWriteAlltoallvThreads, ::testing::Values(1, 3, 4));

// Rank 0 expects one element less from rank 1 than rank 1 sends: every
// rank's init fails (the lengths are agreed), nobody hangs.
TEST(DirectWriteAlltoallvErrors, CountsThatDifferFailEveryRank) {
  runRanks(3, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    std::vector<int64_t> sendcounts(3, 10), recvcounts(3, 10), displs = {0, 10, 20};
    if (env.rank == 0) recvcounts[1] = 9;
    std::vector<uint8_t> send(30), recv(30);
    AlltoallvOptions options;
    options.algorithm = AlltoallvAlgorithm::kDirectWrite;
    const Datatype byte = Datatype::of<std::byte>();
    auto plan =
        alltoallvInit(*comm, send.data(), sendcounts, displs, byte, recv.data(), recvcounts, displs, byte, options);
    ASSERT_FALSE(plan.isOk()) << "rank " << env.rank;
    EXPECT_EQ(plan.status().code(), Code::kInvalidArgument) << plan.status().toString();
  });
}

// A strided send type: every rank runs the pairwise alltoallv.
TEST(DirectWriteAlltoallvFallback, DerivedTypesRunPairwise) {
  runRanks(3, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    const Side strided = testing::vectorSide(1);
    const Side dense = testing::denseSide(strided.type, 1);
    const auto counts = testing::countMatrix(testing::Spread::kRandom, 3, 9, 60);
    testing::AlltoallvBuffers buffers(counts, strided, dense, env.rank, 9);
    AlltoallvOptions options;
    options.algorithm = AlltoallvAlgorithm::kDirectWrite;
    auto plan = alltoallvInit(*comm, buffers.sendbuf(), buffers.sendcounts(), buffers.sdispls(), strided.type,
                              buffers.recvbuf(), buffers.recvcounts(), buffers.rdispls(), dense.type, options);
    ASSERT_TRUE(plan.isOk()) << plan.status().toString();
    EXPECT_EQ(plan->algorithm(), "pairwise");
    // Only direct-write plans move to other buffers (Plan::rebind).
    EXPECT_EQ(plan->rebind(buffers.sendbuf(), buffers.recvbuf()).code(), Code::kUnsupported);
    ASSERT_TRUE(plan->start().isOk());
    ASSERT_TRUE(plan->wait(soon()).isOk());
    EXPECT_EQ(buffers.check(), "");
  });
}

TEST(DirectWriteOptions, NamedLikeTheOthers) {
  auto parsed = parseAlltoallAlgorithm("direct-write");
  ASSERT_TRUE(parsed.isOk());
  EXPECT_EQ(*parsed, AlltoallAlgorithm::kDirectWrite);
  EXPECT_EQ(alltoallAlgorithmName(AlltoallAlgorithm::kDirectWrite), "direct-write");
}

// The messaging puts: lengths that differ, negative and null arguments.
TEST(OneSidedPuts, BadArgumentsAreRefused) {
  runRanks(2, {}, [&](RankEnv& env) {
    std::vector<uint8_t> buffer(64);
    auto& ctx = env.context;
    EXPECT_EQ(ctx.exposeInit(buffer.data(), -1, 1 - env.rank, 3).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(ctx.putInit(nullptr, 8, 1 - env.rank, 3).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(ctx.putInit(buffer.data(), 8, 7, 3).status().code(), Code::kInvalidArgument);
    // Rank 1 exposes 64 bytes, rank 0 puts 32: refused at init.
    if (env.rank == 1) {
      auto exposure = ctx.exposeInit(buffer.data(), 64, 0, 3);
      ASSERT_TRUE(exposure.isOk()) << exposure.status().toString();
    } else {
      auto put = ctx.putInit(buffer.data(), 32, 1, 3, 0, soon());
      ASSERT_FALSE(put.isOk());
      EXPECT_EQ(put.status().code(), Code::kInvalidArgument);
      EXPECT_NE(put.status().toString().find("64"), std::string::npos) << put.status().toString();
    }
  });
}

// One put between two ranks, its notification completing the exposure.
TEST(OneSidedPuts, PutLandsBeforeItsNotification) {
  runRanks(2, {}, [&](RankEnv& env) {
    std::vector<uint8_t> buffer(100000);
    auto& ctx = env.context;
    if (env.rank == 1) {
      auto exposure = ctx.exposeInit(buffer.data(), static_cast<int64_t>(buffer.size()), 0, 9);
      ASSERT_TRUE(exposure.isOk()) << exposure.status().toString();
      for (int run = 0; run < 3; ++run) {
        ASSERT_TRUE(ctx.start(*exposure).isOk());
        env.barrier();  // rank 0 may put now
        ASSERT_TRUE(ctx.wait(*exposure, nullptr, soon()).isOk());
        for (size_t i = 0; i < buffer.size(); ++i) ASSERT_EQ(buffer[i], static_cast<uint8_t>(i * 3 + run)) << i;
      }
    } else {
      for (size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<uint8_t>(i * 3);
      auto put = ctx.putInit(buffer.data(), static_cast<int64_t>(buffer.size()), 1, 9, 0, soon());
      ASSERT_TRUE(put.isOk()) << put.status().toString();
      for (int run = 0; run < 3; ++run) {
        for (size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<uint8_t>(i * 3 + run);
        env.barrier();
        ASSERT_TRUE(ctx.start(*put).isOk());
        ASSERT_TRUE(ctx.wait(*put, nullptr, soon()).isOk());
      }
    }
  });
}

}  // namespace
}  // namespace ibdt::collectives
