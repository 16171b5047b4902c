// alltoallv's failures with ranks as threads: bad arguments refused at init
// (before anything is sent), pairs whose signatures differ failing on both
// ranks with the peer named, and a dead rank: every survivor gets an error
// within the deadline, none hangs.
#include <gtest/gtest.h>

#include <barrier>
#include <thread>
#include <tuple>

#include "collectives/alltoallv_data.h"
#include "ibdt/collectives.h"
#include "support/thread_ranks.h"
#include "support/scoped_env.h"

namespace ibdt::collectives {
namespace {

using datatype::Datatype;
using messaging::testing::RankEnv;
using messaging::testing::runRanks;
using messaging::testing::soon;
using testing::AlltoallvBuffers;
using testing::CountMatrix;
using testing::InPlaceBuffer;
using testing::Side;
using testing::Spread;

void expectError(const Result<Plan>& plan, Code code, const char* words) {
  ASSERT_FALSE(plan.isOk()) << words;
  EXPECT_EQ(plan.status().code(), code) << plan.status().toString();
  EXPECT_NE(plan.status().toString().find(words), std::string::npos) << plan.status().toString();
}

TEST(AlltoallvErrors, BadArgumentsAreRefusedAtInit) {
  runRanks(2, {}, [&](RankEnv& env) {
    auto comm = Communicator::create(env.context);
    ASSERT_TRUE(comm.isOk());
    Communicator& c = **comm;
    std::vector<uint8_t> a(64, 1), b(64, 0);
    const Datatype byte = Datatype::basic(datatype::BasicKind::kByte);
    using Counts = std::vector<int64_t>;
    const Counts four{4, 4}, at{0, 8}, none{0, 0};
    auto init = [&](const void* send, const Counts& sc, const Counts& sd, const Datatype& st, void* recv,
                    const Counts& rc, const Counts& rd, const Datatype& rt, AlltoallvOptions options = {}) {
      return alltoallvInit(c, send, sc, sd, st, recv, rc, rd, rt, options);
    };
    expectError(init(a.data(), {4, -1}, at, byte, b.data(), four, at, byte), Code::kInvalidArgument,
                "negative send count -1 for rank 1");
    expectError(init(a.data(), four, at, byte, b.data(), four, {0, 2}, byte), Code::kInvalidArgument,
                "receive blocks of ranks 0 and 1 overlap");
    expectError(init(a.data(), four, {0, int64_t{1} << 62}, Datatype::of<int64_t>(), b.data(), {1, 1}, at,
                     Datatype::of<int32_t>()),
                Code::kOverflow, "overflow");
    expectError(init(nullptr, four, at, byte, b.data(), four, at, byte), Code::kInvalidArgument, "sendbuf is null");
    expectError(init(a.data(), four, at, byte, nullptr, four, at, byte), Code::kInvalidArgument, "recvbuf is null");
    auto uncommitted = Datatype::contiguous(4, byte);
    ASSERT_TRUE(uncommitted.isOk());
    expectError(init(a.data(), {1, 1}, at, *uncommitted, b.data(), four, at, byte), Code::kInvalidArgument,
                "not committed");
    expectError(init(a.data(), {4}, {0}, byte, b.data(), four, at, byte), Code::kInvalidArgument,
                "one entry per rank");
    expectError(init(b.data(), four, at, byte, b.data(), four, at, byte), Code::kInvalidArgument, "kInPlace");
    const Counts own = env.rank == 0 ? Counts{3, 4} : Counts{4, 3};  // the block to itself: 4 against 3 bytes
    expectError(init(a.data(), four, at, byte, b.data(), own, at, byte), Code::kInvalidArgument, "itself");
    expectError(init(a.data(), four, at, byte, b.data(), four, at, byte, {AlltoallvAlgorithm::kPairwise, -1}),
                Code::kInvalidArgument, "throttle");
    // In place: elements that share no byte, outgoing blocks disjoint, at least one element of auxiliary
    // memory. Here ints at 0 and 8 with extent 4: element 2's first int is element 0's second.
    auto strided = Datatype::vector(2, 1, 2, Datatype::of<int32_t>());
    ASSERT_TRUE(strided.isOk());
    auto shared = Datatype::resized(*strided, 0, 4);
    ASSERT_TRUE(shared.isOk() && shared->commit().isOk());
    expectError(init(kInPlace, {1, 1}, {0, 1}, Datatype(), b.data(), {1, 1}, {0, 1}, *shared),
                Code::kInvalidArgument, "elements of the recvtype overlap");
    expectError(init(kInPlace, four, {0, 3}, Datatype(), b.data(), four, at, byte), Code::kInvalidArgument,
                "send blocks of ranks 0 and 1 overlap");
    AlltoallvOptions tiny;
    tiny.inplaceBytes = 7;
    expectError(init(kInPlace, {1, 1}, {0, 1}, Datatype(), b.data(), {1, 1}, {0, 1}, Datatype::of<double>(), tiny),
                Code::kInvalidArgument, "no element");
    tiny.algorithm = AlltoallvAlgorithm::kInPlaceLimited;
    expectError(init(a.data(), four, at, byte, b.data(), four, at, byte, tiny), Code::kInvalidArgument, "kInPlace");
    EXPECT_EQ(b, std::vector<uint8_t>(64, 0));  // nothing was written
    EXPECT_EQ(a, std::vector<uint8_t>(64, 1));
    // Nothing was sent either: a good exchange on the same communicator is exact.
    const Side bytes = testing::byteSide(1);
    AlltoallvBuffers buffers(testing::countMatrix(Spread::kRandom, 2, 9, 50), bytes, bytes, env.rank, 9);
    ASSERT_TRUE(alltoallv(c, buffers.sendbuf(), buffers.sendcounts(), buffers.sdispls(), byte, buffers.recvbuf(),
                          buffers.recvcounts(), buffers.rdispls(), byte, {}, soon())
                    .isOk());
    EXPECT_EQ(buffers.check(), "");
    // Zero counts with null buffers are fine, in both forms.
    EXPECT_TRUE(alltoallv(c, nullptr, none, none, byte, nullptr, none, none, byte, {}, soon()).isOk());
    EXPECT_TRUE(alltoallv(c, kInPlace, none, none, Datatype(), nullptr, none, none, byte, {}, soon()).isOk());
  });
}

// The counts of 4 ranks as `rank` sees them: rank 0 alone believes that
// rank 1 sends it one element more.
CountMatrix rank0ExpectsOneMoreFromRank1(int rank, Spread spread, uint64_t seed, int64_t scale) {
  CountMatrix counts = testing::countMatrix(spread, 4, seed, scale);
  if (rank == 0) counts[1][0] += 1;
  return counts;
}

// Rank 0 expects one element more from rank 1 than rank 1 sends: both fail
// naming the other; the other pairs still exchange (direct) and nobody
// waits until the deadline.
TEST(AlltoallvErrors, MismatchedPairFailsOnBothRanksNamingThePeer) {
  for (bool inPlace : {false, true}) {
    runRanks(4, {}, [&](RankEnv& env) {
      auto comm = Communicator::create(env.context);
      ASSERT_TRUE(comm.isOk());
      const CountMatrix counts = rank0ExpectsOneMoreFromRank1(env.rank, Spread::kAllEqual, 3, 300);
      const Datatype item = Datatype::of<int32_t>();
      Status status;
      std::string wrong;
      if (inPlace) {
        InPlaceBuffer buffer(counts, 4, env.rank, 3);
        AlltoallvOptions limited;  // the shared segment's init refuses the pair instead (test below)
        limited.algorithm = AlltoallvAlgorithm::kInPlaceLimited;
        auto plan = alltoallvInit(**comm, kInPlace, buffer.sendcounts(), buffer.sdispls(), Datatype(),
                                  buffer.buffer(), buffer.recvcounts(), buffer.rdispls(), item, limited);
        ASSERT_TRUE(plan.isOk()) << plan.status().toString();
        ASSERT_TRUE(plan->start().isOk());
        status = plan->wait(soon());
      } else {
        const Side ints = testing::denseSide(item, 1);
        AlltoallvBuffers buffers(counts, ints, ints, env.rank, 3);
        status = alltoallv(**comm, buffers.sendbuf(), buffers.sendcounts(), buffers.sdispls(), item,
                           buffers.recvbuf(), buffers.recvcounts(), buffers.rdispls(), item, {}, soon());
        const std::vector<int> pair = env.rank == 0 ? std::vector<int>{1} : env.rank == 1 ? std::vector<int>{0}
                                                                                          : std::vector<int>{};
        wrong = buffers.check(pair);
      }
      EXPECT_EQ(wrong, "");
      EXPECT_NE(status.code(), Code::kTimeout) << status.toString();
      if (env.rank <= 1) {
        ASSERT_FALSE(status.isOk()) << "rank " << env.rank << (inPlace ? " in place" : " direct");
        EXPECT_NE(status.toString().find("rank " + std::to_string(1 - env.rank)), std::string::npos)
            << status.toString();
      } else if (!inPlace) {
        EXPECT_TRUE(status.isOk()) << status.toString();
      }
    });
  }
}

// The shared segment checks every pair at init: rank 0 expecting one
// element more from rank 1 fails every rank's init, ranks 0 and 1 naming
// the pair, before any data moves; in place (auto) too.
TEST(AlltoallvErrors, SharedMemoryRefusesAMismatchedPairOnEveryRank) {
  for (bool inPlace : {false, true}) {
    runRanks(4, {}, [&](RankEnv& env) {
      auto comm = Communicator::create(env.context);
      ASSERT_TRUE(comm.isOk());
      const CountMatrix counts = rank0ExpectsOneMoreFromRank1(env.rank, Spread::kRandom, 23, 50);
      const Datatype item = Datatype::of<int32_t>();
      const Side ints = testing::denseSide(item, 1);
      AlltoallvBuffers buffers(counts, ints, ints, env.rank, 23);
      InPlaceBuffer buffer(counts, 4, env.rank, 23);
      AlltoallvOptions shared;
      shared.algorithm = AlltoallvAlgorithm::kSharedMemory;
      auto plan = inPlace ? alltoallvInit(**comm, kInPlace, buffer.sendcounts(), buffer.sdispls(), Datatype(),
                                          buffer.buffer(), buffer.recvcounts(), buffer.rdispls(), item)
                          : alltoallvInit(**comm, buffers.sendbuf(), buffers.sendcounts(), buffers.sdispls(), item,
                                          buffers.recvbuf(), buffers.recvcounts(), buffers.rdispls(), item, shared);
      const char* words = env.rank == 0 ? "rank 1 sends rank 0" : env.rank == 1 ? "rank 1 sends rank 0"
                                                                                : "rank 1's block for rank 0";
      expectError(plan, Code::kInvalidArgument, words);
      EXPECT_EQ(buffers.check({0, 1, 2, 3}), "");  // nothing was written
    });
  }
}

void sharedMemoryDeadRank(bool byTest);

// A rank dies after the shared segment's init, before it packs a run:
// every survivor's run ends with an error naming it, not the deadline,
// whether it waits or polls by test().
TEST(AlltoallvErrors, SharedMemoryDeadRankFailsEverySurvivor) {
  for (bool byTest : {false, true}) {
    SCOPED_TRACE(byTest ? "polled by test()" : "Plan::wait");
    sharedMemoryDeadRank(byTest);
  }
}

void sharedMemoryDeadRank(bool byTest) {
  constexpr int kRanks = 4, kDead = 2;
  messaging::testing::Ranks ranks = messaging::testing::createRanks(kRanks, {});
  for (auto& context : ranks.contexts) ASSERT_NE(context, nullptr);
  const auto counts = testing::countMatrix(Spread::kRandom, kRanks, 41, 300);
  std::barrier built(kRanks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      auto comm = Communicator::create(*ranks.contexts[static_cast<size_t>(rank)]);
      ASSERT_TRUE(comm.isOk());
      const Datatype item = Datatype::of<int32_t>();
      const Side ints = testing::denseSide(item, 1);
      AlltoallvBuffers buffers(counts, ints, ints, rank, 41);
      AlltoallvOptions shared;
      shared.algorithm = AlltoallvAlgorithm::kSharedMemory;
      auto plan = alltoallvInit(**comm, buffers.sendbuf(), buffers.sendcounts(), buffers.sdispls(), item,
                                buffers.recvbuf(), buffers.recvcounts(), buffers.rdispls(), item, shared);
      built.arrive_and_wait();
      ASSERT_TRUE(plan.isOk()) << plan.status().toString();
      if (rank == kDead) {
        messaging::testing::killLoopbackDomain(*ranks.domains[static_cast<size_t>(rank)]);
        plan = makeError(Code::kState, "dead");
        comm->reset();
        ranks.contexts[static_cast<size_t>(rank)].reset();
        return;
      }
      ASSERT_TRUE(plan->start().isOk());
      const Deadline deadline = Deadline::after(std::chrono::seconds(60));
      Status status;
      if (byTest) {
        Result<bool> done = false;
        while (done.isOk() && !*done && !deadline.expired()) {
          std::this_thread::yield();
          done = plan->test();
        }
        status = !done.isOk() ? done.status() : *done ? plan->wait() : makeError(Code::kTimeout, "test loop");
      } else {
        status = plan->wait(deadline);
      }
      ASSERT_FALSE(status.isOk()) << "rank " << rank;
      EXPECT_NE(status.code(), Code::kTimeout) << status.toString();
      EXPECT_NE(status.toString().find("rank 2"), std::string::npos) << status.toString();
      // The plan stays failed: the ranks no longer agree on the run.
      EXPECT_FALSE(plan->start().isOk());
    });
  }
  for (auto& thread : threads) thread.join();
}

// Rank 3's Context is gone before the exchange: every survivor's alltoallv
// ends with an error (not the deadline), in both algorithms.
TEST(AlltoallvErrors, DeadRankFailsEverySurvivor) {
  for (bool inPlace : {false, true}) {
    messaging::testing::Ranks ranks = messaging::testing::createRanks(4, {});
    for (auto& context : ranks.contexts) ASSERT_NE(context, nullptr);
    ranks.contexts[3].reset();
    const auto counts = testing::countMatrix(Spread::kAllEqual, 4, 11, 2000);
    std::vector<std::thread> survivors;
    for (int rank = 0; rank < 3; ++rank) {
      survivors.emplace_back([&, rank] {
        auto comm = Communicator::create(*ranks.contexts[static_cast<size_t>(rank)]);
        ASSERT_TRUE(comm.isOk());
        const Datatype item = Datatype::of<int32_t>();
        const auto deadline = Deadline::after(std::chrono::seconds(30));
        Status status;
        if (inPlace) {
          InPlaceBuffer buffer(counts, 4, rank, 11);
          status = alltoallv(**comm, kInPlace, buffer.sendcounts(), buffer.sdispls(), Datatype(), buffer.buffer(),
                             buffer.recvcounts(), buffer.rdispls(), item, {}, deadline);
        } else {
          const Side ints = testing::denseSide(item, 1);
          AlltoallvBuffers buffers(counts, ints, ints, rank, 11);
          status = alltoallv(**comm, buffers.sendbuf(), buffers.sendcounts(), buffers.sdispls(), item,
                             buffers.recvbuf(), buffers.recvcounts(), buffers.rdispls(), item, {}, deadline);
          EXPECT_EQ(buffers.check({3}), "");  // the survivors' blocks still arrived
        }
        ASSERT_FALSE(status.isOk()) << "rank " << rank;
        EXPECT_NE(status.code(), Code::kTimeout) << status.toString();
      });
    }
    for (auto& thread : survivors) thread.join();
  }
}

// A rank crashes in the middle of a run (after `calls` of its own test()
// calls: wherever that leaves it) of a persistent in-place or direct plan:
// every survivor's run ends with an error that is not the deadline, or
// completes with every byte right (it had finished with the dead rank).
class DeadRankMidRun : public ::testing::TestWithParam<std::tuple<bool, int>> {};

TEST_P(DeadRankMidRun, EverySurvivorFailsOrFinishesRight) {
  const bool inPlace = std::get<0>(GetParam());
  const int calls = std::get<1>(GetParam());
  constexpr int kRanks = 4, kDead = 2;
  messaging::testing::Ranks ranks = messaging::testing::createRanks(kRanks, {});
  for (auto& context : ranks.contexts) ASSERT_NE(context, nullptr);
  const auto counts = testing::countMatrix(Spread::kRandom, kRanks, 31, 6000);
  AlltoallvOptions options;
  options.inplaceBytes = 512;  // many phases, so a crash falls between them
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      auto comm = Communicator::create(*ranks.contexts[static_cast<size_t>(rank)]);
      ASSERT_TRUE(comm.isOk());
      const Datatype item = Datatype::of<int32_t>();
      const Side ints = testing::denseSide(item, 1);
      InPlaceBuffer inPlaceBuffer(counts, 4, rank, 31);
      AlltoallvBuffers buffers(counts, ints, ints, rank, 31);
      auto plan = inPlace ? alltoallvInit(**comm, kInPlace, inPlaceBuffer.sendcounts(), inPlaceBuffer.sdispls(),
                                          Datatype(), inPlaceBuffer.buffer(), inPlaceBuffer.recvcounts(),
                                          inPlaceBuffer.rdispls(), item, options)
                          : alltoallvInit(**comm, buffers.sendbuf(), buffers.sendcounts(), buffers.sdispls(), item,
                                          buffers.recvbuf(), buffers.recvcounts(), buffers.rdispls(), item, options);
      ASSERT_TRUE(plan.isOk()) << plan.status().toString();
      ASSERT_TRUE(plan->start().isOk());
      if (rank == kDead) {
        for (int call = 0; call < calls; ++call) (void)plan->test();
        // A crash: its links fail (as a dead process's shm liveness or a
        // verbs QP error report it) once its endpoints are gone.
        messaging::testing::killLoopbackDomain(*ranks.domains[static_cast<size_t>(rank)]);
        plan = makeError(Code::kState, "dead");
        comm->reset();
        ranks.contexts[static_cast<size_t>(rank)].reset();
        return;
      }
      Status status = plan->wait(Deadline::after(std::chrono::seconds(60)));
      EXPECT_NE(status.code(), Code::kTimeout) << "rank " << rank << ": " << status.toString();
      if (status.isOk()) {
        EXPECT_EQ(inPlace ? inPlaceBuffer.check() : buffers.check(), "") << "rank " << rank;
      }
    });
  }
  for (auto& thread : threads) thread.join();
}

std::string midRunName(const ::testing::TestParamInfo<std::tuple<bool, int>>& param) {
  return std::string(std::get<0>(param.param) ? "InPlace" : "Direct") + "After" +
         std::to_string(std::get<1>(param.param)) + "Calls";
}

INSTANTIATE_TEST_SUITE_P(Crashes, DeadRankMidRun, ::testing::Combine(::testing::Bool(), ::testing::Values(0, 2, 8, 32)),
                         midRunName);

// Zero-copy Bruck learns every block's size at init: rank 0 expecting one
// element more from rank 1 fails every rank's init (rank 0 naming rank 1),
// before any data moves; so do types of different basic kinds.
TEST(AlltoallvErrors, BruckRefusesMismatchedCountsAndMixedKindsOnEveryRank) {
  runRanks(4, {}, [&](RankEnv& env) {
    auto comm = Communicator::create(env.context);
    ASSERT_TRUE(comm.isOk());
    AlltoallvOptions bruck;
    bruck.algorithm = AlltoallvAlgorithm::kBruckZeroCopy;
    auto counts = testing::countMatrix(Spread::kRandom, 4, 21, 50);
    counts[1][0] += 1;
    if (env.rank != 0) counts[1][0] -= 1;  // only rank 0 believes it
    const Datatype item = Datatype::of<int32_t>();
    const Side ints = testing::denseSide(item, 1);
    AlltoallvBuffers buffers(counts, ints, ints, env.rank, 21);
    auto init = [&](const Datatype& type) {
      return alltoallvInit(**comm, buffers.sendbuf(), buffers.sendcounts(), buffers.sdispls(), type,
                           buffers.recvbuf(), buffers.recvcounts(), buffers.rdispls(), type, bruck);
    };
    expectError(init(item), Code::kInvalidArgument, env.rank == 0 ? "from rank 1, which sends" : "another rank");
    // The same sizes, but rank 2 sends and receives float: no rank proceeds.
    expectError(init(env.rank == 2 ? Datatype::of<float>() : item), Code::kInvalidArgument, "one basic kind");
    // Rank 3's arguments are refused: it still takes part, so no rank waits.
    std::vector<int64_t> negative = buffers.sendcounts();
    if (env.rank == 3) negative[0] = -1;
    expectError(alltoallvInit(**comm, buffers.sendbuf(), negative, buffers.sdispls(), item, buffers.recvbuf(),
                              buffers.recvcounts(), buffers.rdispls(), item, bruck),
                Code::kInvalidArgument, env.rank == 3 ? "negative send count" : "arguments were refused");
    EXPECT_EQ(buffers.check({0, 1, 2, 3}), "");  // nothing was written
  });
}

TEST(AlltoallvOptions, KnobsAreReadAndBadValuesNameThem) {
  {
    test::ScopedEnv bytes("IBDT_ALLTOALLV_INPLACE_BYTES", "64K");
    test::ScopedEnv buffers("IBDT_ALLTOALLV_INPLACE_BUFFERS", "5");
    auto options = alltoallvOptionsFromEnvironment();
    ASSERT_TRUE(options.isOk()) << options.status().toString();
    EXPECT_EQ(options->inplaceBytes, 65536);
    EXPECT_EQ(options->inplaceBuffers, 5);
  }
  for (const char* bad : {"0", "-1", "lots"}) {
    test::ScopedEnv bytes("IBDT_ALLTOALLV_INPLACE_BYTES", bad);
    auto options = alltoallvOptionsFromEnvironment();
    ASSERT_FALSE(options.isOk()) << bad;
    EXPECT_NE(options.status().toString().find("IBDT_ALLTOALLV_INPLACE_BYTES"), std::string::npos);
  }
  {
    test::ScopedEnv algorithm("IBDT_ALLTOALLV_ALGORITHM", "bruck-zero-copy");
    auto options = alltoallvOptionsFromEnvironment();
    ASSERT_TRUE(options.isOk()) << options.status().toString();
    EXPECT_EQ(options->algorithm, AlltoallvAlgorithm::kBruckZeroCopy);
  }
  {
    test::ScopedEnv algorithm("IBDT_ALLTOALLV_ALGORITHM", "bruck");
    auto options = alltoallvOptionsFromEnvironment();
    ASSERT_FALSE(options.isOk());
    EXPECT_NE(options.status().toString().find("IBDT_ALLTOALLV_ALGORITHM"), std::string::npos);
  }
  {
    test::ScopedEnv scratch("IBDT_ALLTOALLV_SCRATCH_BYTES", "256K");
    auto options = alltoallvOptionsFromEnvironment();
    ASSERT_TRUE(options.isOk()) << options.status().toString();
    EXPECT_EQ(options->scratchBytes, 256 << 10);
  }
  {
    test::ScopedEnv scratch("IBDT_ALLTOALLV_SCRATCH_BYTES", "2T");
    auto options = alltoallvOptionsFromEnvironment();
    ASSERT_FALSE(options.isOk());
    EXPECT_NE(options.status().toString().find("IBDT_ALLTOALLV_SCRATCH_BYTES"), std::string::npos);
  }
  auto defaults = alltoallvOptionsFromEnvironment();
  ASSERT_TRUE(defaults.isOk());
  EXPECT_EQ(defaults->inplaceBytes, AlltoallvOptions{}.inplaceBytes);  // the knobs' defaults are the struct's
  EXPECT_EQ(defaults->inplaceBuffers, AlltoallvOptions{}.inplaceBuffers);
  EXPECT_EQ(defaults->scratchBytes, AlltoallvOptions{}.scratchBytes);
}

}  // namespace
}  // namespace ibdt::collectives
