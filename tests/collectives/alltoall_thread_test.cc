// Pairwise alltoall with ranks as threads over the loopback fabric (fast,
// RC rules enforced): every byte of every receive buffer checked, gaps and
// guard bytes included, for contiguous, strided and random derived send
// types, every throttle, zero counts, bad arguments and mismatched
// signatures (which must fail, not hang).
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>

#include "collectives/alltoall_data.h"
#include "collectives/plan_checks.h"
#include "collectives/world.h"
#include "ibdt/collectives.h"
#include "support/thread_ranks.h"
#include "support/scoped_env.h"

namespace ibdt::collectives {
namespace {

using datatype::Datatype;
using messaging::testing::RankEnv;
using messaging::testing::runRanks;
using testing::AlltoallBuffers;
using testing::Side;


using testing::world;

// One alltoall of `send` -> `recv` sides on every rank, checked.
void exchangeAndCheck(RankEnv& env, Communicator& comm, const Side& send, const Side& recv, int64_t throttle) {
  AlltoallBuffers buffers(send, recv, comm.size(), comm.rank());
  AlltoallOptions options;
  options.throttle = throttle;
  Status status = alltoall(comm, buffers.sendbuf(), send.count, send.type, buffers.recvbuf(), recv.count, recv.type,
                           options, messaging::testing::soon());
  ASSERT_TRUE(status.isOk()) << "rank " << env.rank << ": " << status.toString();
  EXPECT_EQ(buffers.check(), "");
}

struct Shape {
  int ranks;
  int64_t throttle;
};

class PairwiseThreads : public ::testing::TestWithParam<Shape> {};

TEST_P(PairwiseThreads, ContiguousBytesEverySize) {
  const Shape shape = GetParam();
  runRanks(shape.ranks, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    // Eager, pipelined eager and rendezvous sizes per pair.
    for (int64_t bytes : {1, 8, 1000, 40000, 300000}) {
      exchangeAndCheck(env, *comm, testing::byteSide(bytes), testing::byteSide(bytes), shape.throttle);
    }
  });
}

TEST_P(PairwiseThreads, StridedSendContiguousReceiveAndBack) {
  const Shape shape = GetParam();
  runRanks(shape.ranks, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    for (int64_t count : {1, 7, 3000}) {
      Side strided = testing::vectorSide(count);
      Side dense = testing::denseSide(strided.type, count);
      exchangeAndCheck(env, *comm, strided, dense, shape.throttle);
      exchangeAndCheck(env, *comm, dense, strided, shape.throttle);
      exchangeAndCheck(env, *comm, strided, strided, shape.throttle);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Shapes, PairwiseThreads,
                         ::testing::Values(Shape{1, 8}, Shape{2, 8}, Shape{3, 1}, Shape{4, 0}, Shape{5, 2},
                                           Shape{6, 1000}),
                         [](const auto& shape) {
                           return "np" + std::to_string(shape.param.ranks) + "_throttle" +
                                  std::to_string(shape.param.throttle);
                         });

// Random derived send types (the datatype tests' generator, the same seed on
// every rank so signatures agree), received dense with the same signature.
TEST(PairwiseThreadsRandom, RandomDerivedSendTypes) {
  constexpr int kRanks = 4;
  runRanks(kRanks, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    datatype::testing::TypeGenerator generator(77);
    int tried = 0;
    for (int round = 0; tried < 12 && round < 200; ++round) {
      auto random = generator.make(3, 600);
      if (!random.type.valid() || !random.type.commit().isOk()) continue;
      const int64_t count = 1 + round % 3;
      Side send = testing::sideOf(random.type, random.ref, count);
      Side recv = testing::denseSide(random.type, count);
      SCOPED_TRACE(random.description);
      exchangeAndCheck(env, *comm, send, recv, 1 + round % 4);
      ++tried;
    }
    EXPECT_EQ(tried, 12);
  });
}

TEST(PairwiseThreadsPlan, StartedTwiceGivesTheSameDataAndTestThenWait) {
  runRanks(3, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    Side send = testing::vectorSide(50), recv = testing::denseSide(send.type, 50);
    AlltoallBuffers buffers(send, recv, comm->size(), comm->rank());
    auto plan = alltoallInit(*comm, buffers.sendbuf(), send.count, send.type, buffers.recvbuf(), recv.count,
                             recv.type, {AlltoallAlgorithm::kPairwise, 1});
    ASSERT_TRUE(plan.isOk()) << plan.status().toString();
    EXPECT_EQ(plan->algorithm(), "pairwise");
    EXPECT_EQ(plan->wait().code(), Code::kState);  // not started
    for (int run = 0; run < 3; ++run) {
      buffers.clearReceive();
      ASSERT_TRUE(plan->start().isOk());
      EXPECT_EQ(plan->start().code(), Code::kState);  // still active
      if (run == 1) {  // test() until done, then wait() returns at once
        auto deadline = messaging::testing::soon();
        bool done = false;
        while (!done && !deadline.expired()) {
          auto tested = plan->test();
          ASSERT_TRUE(tested.isOk()) << tested.status().toString();
          done = *tested;
        }
        ASSERT_TRUE(done);
      }
      Status status = plan->wait(messaging::testing::soon());
      ASSERT_TRUE(status.isOk()) << status.toString();
      EXPECT_EQ(buffers.check(), "") << "run " << run;
      env.barrier();  // nobody clears its buffer while a peer's run still writes it
    }
  });
}

// A wait that gives up leaves the run active and resumable: rank 1 starts
// only after rank 0's wait timed out (its message cannot have arrived), and
// rank 0's next wait completes the run with every byte right.
TEST(PairwiseThreadsPlan, TimedOutWaitResumes) {
  runRanks(2, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    Side side = testing::byteSide(100);
    AlltoallBuffers buffers(side, side, 2, env.rank);
    auto plan = alltoallInit(*comm, buffers.sendbuf(), side.count, side.type, buffers.recvbuf(), side.count,
                             side.type);
    ASSERT_TRUE(plan.isOk());
    ASSERT_NO_FATAL_FAILURE(testing::checkTimedOutWaitResumes(env, *plan, "receive from rank 1"));
    EXPECT_EQ(buffers.check(), "");
  });
}

TEST(PairwiseThreadsPlan, ZeroCountsMoveNothing) {
  runRanks(4, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    exchangeAndCheck(env, *comm, testing::byteSide(0), testing::byteSide(0), 2);
    // Zero elements of a strided type against zero bytes: equal (empty) signatures.
    exchangeAndCheck(env, *comm, testing::vectorSide(0), testing::byteSide(0), 0);
    // Null buffers are fine when nothing moves.
    EXPECT_TRUE(alltoall(*comm, nullptr, 0, Datatype::of<int32_t>(), nullptr, 0, Datatype::of<double>(), {},
                         messaging::testing::soon())
                    .isOk());
  });
}

// Collective traffic uses its own context id: a user's wildcard receive on
// the default communicator, posted before, sees only the user's message.
TEST(PairwiseThreadsPlan, CollectiveTrafficNeverMatchesUserReceives) {
  runRanks(3, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    int32_t user = -1;
    auto pending = env.context.irecv(&user, 1, Datatype::of<int32_t>(), messaging::kAnySource, messaging::kAnyTag);
    ASSERT_TRUE(pending.isOk());
    exchangeAndCheck(env, *comm, testing::byteSide(4), testing::byteSide(4), 8);
    const int32_t mine = 1000 + env.rank;
    ASSERT_TRUE(env.context.send(&mine, 1, Datatype::of<int32_t>(), (env.rank + 1) % 3, 9).isOk());
    messaging::RecvInfo info;
    ASSERT_TRUE(env.context.wait(*pending, &info, messaging::testing::soon()).isOk());
    EXPECT_EQ(user, 1000 + (env.rank + 2) % 3);
    EXPECT_EQ(info.tag, 9);
  });
}

TEST(PairwiseThreadsErrors, BadArgumentsAreRefusedAtInit) {
  runRanks(2, {}, [&](RankEnv& env) {
    auto comm = world(env);
    ASSERT_NE(comm, nullptr);
    std::vector<uint8_t> a(64), b(64);
    const Datatype byte = Datatype::basic(datatype::BasicKind::kByte);
    auto expectError = [&](Result<Plan> plan, Code code, const char* words) {
      ASSERT_FALSE(plan.isOk());
      EXPECT_EQ(plan.status().code(), code) << plan.status().toString();
      EXPECT_NE(plan.status().toString().find(words), std::string::npos) << plan.status().toString();
    };
    expectError(alltoallInit(*comm, a.data(), 4, Datatype(), b.data(), 4, byte), Code::kInvalidArgument, "null");
    expectError(alltoallInit(*comm, a.data(), -1, byte, b.data(), 4, byte), Code::kInvalidArgument, "negative");
    auto uncommitted = Datatype::contiguous(4, byte);
    ASSERT_TRUE(uncommitted.isOk());
    expectError(alltoallInit(*comm, a.data(), 1, *uncommitted, b.data(), 4, byte), Code::kInvalidArgument,
                "not committed");
    // Local signatures differ: 4 bytes against 2 bytes, and bytes against int32.
    expectError(alltoallInit(*comm, a.data(), 4, byte, b.data(), 2, byte), Code::kInvalidArgument, "signature");
    expectError(alltoallInit(*comm, a.data(), 4, byte, b.data(), 1, Datatype::of<int32_t>()),
                Code::kInvalidArgument, "signature");
    expectError(alltoallInit(*comm, nullptr, 4, byte, b.data(), 4, byte), Code::kInvalidArgument, "sendbuf");
    auto huge = Datatype::resized(byte, 0, int64_t{1} << 62);
    ASSERT_TRUE(huge.isOk() && huge->commit().isOk());
    expectError(alltoallInit(*comm, a.data(), 4, *huge, b.data(), 4, byte), Code::kOverflow, "overflow");
    expectError(alltoallInit(*comm, a.data(), 4, byte, b.data(), 4, byte, {AlltoallAlgorithm::kPairwise, -1}),
                Code::kInvalidArgument, "throttle");
    EXPECT_EQ(b, std::vector<uint8_t>(64, 0));  // nothing was written
    auto badId = Communicator::create(env.context, {}, 7);
    ASSERT_FALSE(badId.isOk());
    EXPECT_NE(badId.status().toString().find("below"), std::string::npos);
    auto badMap = Communicator::create(env.context, {{0, 0}});
    ASSERT_FALSE(badMap.isOk());
  });
}

TEST(AlltoallOptions, ThrottleKnobIsReadAndBadValuesNameIt) {
  {
    test::ScopedEnv env("IBDT_ALLTOALL_THROTTLE", "3");
    auto options = alltoallOptionsFromEnvironment();
    ASSERT_TRUE(options.isOk()) << options.status().toString();
    EXPECT_EQ(options->throttle, 3);
  }
  for (const char* bad : {"-1", "many", "2x"}) {
    test::ScopedEnv env("IBDT_ALLTOALL_THROTTLE", bad);
    auto options = alltoallOptionsFromEnvironment();
    ASSERT_FALSE(options.isOk()) << bad;
    EXPECT_NE(options.status().toString().find("IBDT_ALLTOALL_THROTTLE"), std::string::npos)
        << options.status().toString();
  }
  auto defaults = alltoallOptionsFromEnvironment();
  ASSERT_TRUE(defaults.isOk());
  EXPECT_EQ(defaults->throttle, AlltoallOptions{}.throttle);  // the knob's default is the struct's
}

// Rank 0 exchanges int32s, everyone else the same number of bytes as raw
// bytes: each rank is consistent locally, but every pair with rank 0
// mismatches. Every rank must get an error naming the signature within the
// deadline, and the blocks of the other (matching) pairs still arrive.
TEST(PairwiseThreadsErrors, MismatchedSignatureFailsThePairsWithoutHanging) {
  for (int64_t ints : {4, 12000, 100000}) {  // eager, pipelined eager, rendezvous
    runRanks(4, {}, [&](RankEnv& env) {
      auto comm = world(env);
      ASSERT_NE(comm, nullptr);
      Side side = env.rank == 0 ? testing::denseSide(Datatype::of<int32_t>(), ints) : testing::byteSide(ints * 4);
      AlltoallBuffers buffers(side, side, comm->size(), comm->rank());
      Status status = alltoall(*comm, buffers.sendbuf(), side.count, side.type, buffers.recvbuf(), side.count,
                               side.type, {AlltoallAlgorithm::kPairwise, 2}, messaging::testing::soon());
      ASSERT_FALSE(status.isOk()) << "rank " << env.rank;
      EXPECT_NE(status.code(), Code::kTimeout) << status.toString();
      EXPECT_NE(status.toString().find("signature"), std::string::npos) << status.toString();
      if (env.rank == 0) {
        EXPECT_EQ(buffers.check({1, 2, 3}), "");
      } else {
        EXPECT_EQ(buffers.check({0}), "");
      }
    });
  }
}

}  // namespace
}  // namespace ibdt::collectives
