// The call mailbox of non-blocking alltoalls (collectives/ialltoall_mailbox.h,
// the MPI bridge's MPI_Ialltoall of small blocks), ranks as threads over
// the loopback fabric: more calls in flight than the mailbox has phases,
// completed in different orders on different ranks, by wait and by test,
// with bytes, strided and in-place blocks, every byte of every call
// checked; a pair that disagrees and a refused call fail where they should
// and the next call still runs; forty calls in flight; a dead rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <memory>
#include <thread>
#include <vector>

#include "collectives/alltoall_args.h"
#include "collectives/alltoall_data.h"
#include "collectives/call_mailbox_ranks.h"
#include "collectives/ialltoall_mailbox.h"
#include "collectives/plan_checks.h"
#include "collectives/world.h"
#include "support/thread_ranks.h"

namespace ibdt::collectives {
namespace {

using messaging::testing::RankEnv;
using messaging::testing::runRanks;
using messaging::testing::soon;
using testing::AlltoallBuffers;
using testing::Side;

using testing::mailboxOf;
using testing::rankMailbox;
using testing::startCall;
constexpr int64_t kCapacity = testing::kMailboxCapacity;

// One agreed call over fresh buffers of `side`, started, waited for and
// checked: "" when every byte arrived.
std::string runAgreedCall(IalltoallMailbox& box, const Side& side, int rank) {
  AlltoallBuffers buffers(side, side, box.comm().size(), rank);
  auto plan = startCall(box, buffers, false);
  if (!plan.isOk()) return plan.status().toString();
  if (Status waited = (*plan)->wait(soon()); !waited.isOk()) return waited.toString();
  return buffers.check();
}

// Seven calls in flight (the mailbox has four phases, so the later calls'
// writes wait for the earlier calls' readers), of 0-64-byte, strided and
// in-place blocks; odd ranks complete them newest first by wait, even
// ranks oldest first by test; three rounds with new data.
TEST(IalltoallMailboxThreads, CallsInFlightArriveWhateverOrderTheyAreCompletedIn) {
  for (int p : {1, 2, 3, 5, 8}) {
    runRanks(p, testing::singleCopyFrom(0), [&](RankEnv& env) {
      auto [comm, box] = rankMailbox(env);
      ASSERT_NE(box, nullptr);
      const Side strided = testing::vectorSide(2);
      const Side dense = testing::denseSide(strided.type, 2);
      struct Shape {
        Side send, recv;
        bool inPlace;
      };
      const std::vector<Shape> shapes = {{testing::byteSide(8), testing::byteSide(8), false},
                                         {testing::byteSide(0), testing::byteSide(0), false},
                                         {strided, dense, false},
                                         {testing::byteSide(13), testing::byteSide(13), true},
                                         {testing::byteSide(1), testing::byteSide(1), false},
                                         {dense, strided, false},
                                         {testing::byteSide(64), testing::byteSide(64), false}};
      for (int round = 0; round < 3; ++round) {
        std::vector<std::unique_ptr<AlltoallBuffers>> buffers;
        std::vector<Plan*> plans;
        for (const Shape& shape : shapes) {
          buffers.push_back(std::make_unique<AlltoallBuffers>(shape.send, shape.recv, p, env.rank));
          buffers.back()->refill(round);
          if (shape.inPlace) buffers.back()->loadInPlace();
          auto plan = startCall(*box, *buffers.back(), shape.inPlace);
          ASSERT_TRUE(plan.isOk()) << plan.status().toString();
          plans.push_back(*plan);
        }
        const bool odd = env.rank % 2 == 1;
        for (size_t i = 0; i < plans.size(); ++i) {
          const size_t k = odd ? plans.size() - 1 - i : i;
          const Status finished = testing::finishPlan(*plans[k], !odd);
          ASSERT_TRUE(finished.isOk()) << "p " << p << " rank " << env.rank << " call " << k << ": "
                                       << finished.toString();
          EXPECT_EQ(buffers[k]->check(), "")
              << "p " << p << " rank " << env.rank << " round " << round << " call " << k;
        }
      }
    });
  }
}

// Rank 1 passes 8-byte blocks where the others pass 16: every pair with
// rank 1 fails on both of its ranks, naming the peer, the other pairs
// arrive; the next call, agreed, runs.
TEST(IalltoallMailboxThreads, APairThatDisagreesFailsOnBothOfItsRanksAndTheNextCallRuns) {
  runRanks(4, testing::singleCopyFrom(0), [&](RankEnv& env) {
    auto [comm, box] = rankMailbox(env);
    ASSERT_NE(box, nullptr);
    const Side side = testing::byteSide(env.rank == 1 ? 8 : 16);
    AlltoallBuffers wrong(side, side, 4, env.rank);
    auto plan = startCall(*box, wrong, false);
    ASSERT_TRUE(plan.isOk()) << plan.status().toString();
    const Status status = (*plan)->wait(soon());
    ASSERT_EQ(status.code(), Code::kInvalidArgument) << status.toString();
    const std::string pair = env.rank == 1 ? "rank 2 sends rank 1" : "rank 1 sends rank " + std::to_string(env.rank);
    EXPECT_NE(status.toString().find(pair), std::string::npos) << status.toString();
    if (env.rank != 1) {
      EXPECT_EQ(wrong.check({1}), "") << "rank " << env.rank;  // the agreeing pairs arrived
    }
    EXPECT_EQ(runAgreedCall(*box, testing::byteSide(16), env.rank), "") << "rank " << env.rank;
  });
}

// Rank 2's arguments are refused (a negative count): its call fails with
// why, every other rank's names it; the next call runs. Blocks that do not
// fit a row are refused too, the call still numbered on every rank.
TEST(IalltoallMailboxThreads, ARefusedCallFailsEveryRankAndTheNextCallRuns) {
  runRanks(3, testing::singleCopyFrom(0), [&](RankEnv& env) {
    auto [comm, box] = rankMailbox(env);
    ASSERT_NE(box, nullptr);
    const Side side = testing::byteSide(8);
    AlltoallBuffers buffers(side, side, 3, env.rank);
    auto checked = checkAlltoallArgs(*comm, buffers.sendbuf(), env.rank == 2 ? -1 : side.count, side.type,
                                     buffers.recvbuf(), side.count, side.type);
    auto plan = box->next(checked);
    ASSERT_TRUE(plan.isOk()) << plan.status().toString();
    ASSERT_TRUE((*plan)->start().isOk());
    const Status status = (*plan)->wait(soon());
    ASSERT_FALSE(status.isOk());
    if (env.rank != 2) {
      EXPECT_NE(status.toString().find("rank 2's arguments were refused"), std::string::npos) << status.toString();
    }
    const Side big = testing::byteSide(kCapacity);  // p blocks do not fit: refused, but numbered
    AlltoallBuffers tooBig(big, big, 3, env.rank);
    auto refused = startCall(*box, tooBig, false);
    ASSERT_TRUE(refused.isOk()) << refused.status().toString();
    EXPECT_EQ((*refused)->wait(soon()).code(), Code::kInvalidArgument);
    EXPECT_EQ(runAgreedCall(*box, side, env.rank), "") << "rank " << env.rank;
  });
}

// Forty calls started before any is waited for (ten times the phases: the
// later calls' writes wait in the earlier calls' tests), then waited for
// newest first; a second round reuses their plans; every byte of every call.
TEST(IalltoallMailboxThreads, ManyCallsInFlightAllArriveAndTheirPlansServeLaterCalls) {
  runRanks(3, testing::singleCopyFrom(0), [&](RankEnv& env) {
    auto [comm, box] = rankMailbox(env);
    ASSERT_NE(box, nullptr);
    const Side side = testing::byteSide(24);
    std::vector<Plan*> firstRound;
    for (int round = 0; round < 2; ++round) {
      std::vector<std::unique_ptr<AlltoallBuffers>> buffers;
      std::vector<Plan*> plans;
      for (int k = 0; k < 40; ++k) {
        buffers.push_back(std::make_unique<AlltoallBuffers>(side, side, 3, env.rank));
        buffers.back()->refill(k + round);
        auto plan = startCall(*box, *buffers.back(), false);
        ASSERT_TRUE(plan.isOk()) << "call " << k << ": " << plan.status().toString();
        if (round == 1) {
          EXPECT_NE(std::find(firstRound.begin(), firstRound.end(), *plan), firstRound.end()) << "a new plan";
        }
        plans.push_back(*plan);
      }
      for (size_t k = plans.size(); k-- > 0;) {
        ASSERT_TRUE(plans[k]->wait(soon()).isOk()) << "call " << k;
        EXPECT_EQ(buffers[k]->check(), "") << "rank " << env.rank << " call " << k;
      }
      if (round == 0) firstRound = plans;
    }
  });
}

// A rank dies after the mailbox was made: every survivor's two calls in
// flight end with an error, by wait and by test, not at the deadline (a
// survivor that found the death first stops writing, and says so, so its
// peers stop waiting for it); later calls fail at once.
TEST(IalltoallMailboxThreads, ADeadRankFailsEverySurvivor) {
  for (bool byTest : {false, true}) {
    constexpr int kRanks = 4, kDead = 3;
    messaging::testing::runRanksThatMayDie(
        kRanks, [&](messaging::testing::Ranks& ranks, int rank, std::barrier<>& made) {
          auto comm = testing::world(*ranks.contexts[static_cast<size_t>(rank)]);
          std::shared_ptr<IalltoallMailbox> box = comm ? mailboxOf(*comm) : nullptr;
          made.arrive_and_wait();
          if (rank == kDead) {
            testing::dieHere(ranks, rank, comm, box);
            return;
          }
          ASSERT_NE(box, nullptr);
          // Two calls in flight: the second must fail too, even where it
          // first waits for a survivor whose mailbox broke in the first.
          const Side side = testing::byteSide(8);
          AlltoallBuffers first(side, side, kRanks, rank), second(side, side, kRanks, rank);
          auto one = startCall(*box, first, false);
          auto two = startCall(*box, second, false);
          ASSERT_TRUE(one.isOk() && two.isOk());
          for (Plan* plan : {*one, *two}) {
            const Status status = testing::finishPlan(*plan, byTest);
            ASSERT_FALSE(status.isOk()) << "rank " << rank;
            EXPECT_NE(status.code(), Code::kTimeout) << status.toString();
          }
          EXPECT_FALSE(startCall(*box, first, false).isOk());
        });
  }
}

}  // namespace
}  // namespace ibdt::collectives
