// The call mailbox's alltoallv calls (collectives/ialltoallv_mailbox_run.h,
// the MPI bridge's MPI_Ialltoallv on one node), ranks as threads over the
// loopback fabric: every spread of counts, bytes and derived types on both
// sides, several calls in flight with an alltoall among them, completed in
// different orders on different ranks, every byte of every call checked;
// calls whose blocks do not fit some rank's row run the fallback on every
// rank and on no rank otherwise; a pair that disagrees, a refused call and
// ranks that start different collectives fail where they should, and the
// next call runs; a fallback that cannot start on one rank fails every
// rank instead of leaving them waiting; the pair views lie beside a row's
// capacity.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "collectives/alltoall_args.h"
#include "collectives/alltoall_data.h"
#include "collectives/alltoallv_args.h"
#include "collectives/alltoallv_data.h"
#include "collectives/call_mailbox_ranks.h"
#include "collectives/ialltoallv_calls.h"
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
using testing::AlltoallvBuffers;
using testing::CountMatrix;
using testing::Side;
using testing::Spread;

using testing::bytesCall;
using testing::expectNextCallRuns;
using testing::mailboxOf;
using testing::rankMailbox;
using testing::startV;
using testing::VCall;

// Per spread: four alltoallv calls in flight (small bytes; bytes up to 200
// per pair, which overflow the 4 KiB rows at most sizes; strided into
// dense; dense into strided) and an alltoall between them; odd ranks
// complete them newest first by wait, even ranks oldest first by test.
TEST(IalltoallvMailboxThreads, EverySpreadInFlightTogetherEveryByteRight) {
  for (int p : {1, 2, 3, 5, 8}) {
    runRanks(p, testing::singleCopyFrom(0), [&](RankEnv& env) {
      auto comm = testing::world(env);
      ASSERT_NE(comm, nullptr);
      auto box = mailboxOf(*comm);
      ASSERT_NE(box, nullptr);
      const Side bytes = testing::byteSide(1), strided = testing::vectorSide(1);
      const Side dense = testing::denseSide(strided.type, 1);
      uint64_t seed = 1000 * static_cast<uint64_t>(p);
      for (Spread spread : testing::kSpreads) {
        std::vector<VCall> calls;
        auto start = [&](int64_t scale, const Side& send, const Side& recv) {
          ++seed;
          calls.push_back(startV(*box, testing::countMatrix(spread, p, seed, scale), send, recv, env.rank, seed));
        };
        start(3, bytes, bytes);
        start(200, bytes, bytes);
        const Side block = testing::byteSide(5);
        AlltoallBuffers regular(block, block, p, env.rank);
        auto checked = checkAlltoallArgs(*comm, regular.sendbuf(), block.count, block.type, regular.recvbuf(),
                                         block.count, block.type);
        auto alltoall = box->next(checked);
        ASSERT_TRUE(alltoall.isOk()) << alltoall.status().toString();
        ASSERT_TRUE((*alltoall)->start().isOk());
        start(4, strided, dense);
        start(30, dense, strided);
        const bool odd = env.rank % 2 == 1;
        const std::string where = std::string(testing::spreadName(spread)) + " p " + std::to_string(p) + " rank " +
                                  std::to_string(env.rank);
        for (size_t i = 0; i < calls.size(); ++i) {
          VCall& call = calls[odd ? calls.size() - 1 - i : i];
          ASSERT_NE(call.plan, nullptr) << where;
          const Status finished = testing::finishPlan(*call.plan, !odd);
          ASSERT_TRUE(finished.isOk()) << where << " call " << i << ": " << finished.toString();
          EXPECT_EQ(call.buffers->check(), "") << where << " call " << i;
          EXPECT_EQ(call.fallback->built(), call.expectFallback ? 1 : 0) << where << " call " << i;
        }
        ASSERT_TRUE(testing::finishPlan(**alltoall, false).isOk()) << where;
        EXPECT_EQ(regular.check(), "") << where;
      }
    });
  }
}

// Rank 1 sends rank 2 one element fewer than rank 2 expects: that pair
// fails on both of its ranks, naming both, in a call that fits and in one
// that runs by messages; the other pairs arrive; the next call runs.
TEST(IalltoallvMailboxThreads, APairThatDisagreesFailsOnBothOfItsRanksAndTheNextCallRuns) {
  runRanks(4, testing::singleCopyFrom(0), [&](RankEnv& env) {
    auto [comm, box] = rankMailbox(env);
    ASSERT_NE(box, nullptr);
    const Side bytes = testing::byteSide(1);
    for (int64_t scale : {8, 2000}) {
      const CountMatrix counts = testing::countMatrix(Spread::kAllEqual, 4, 7, scale);
      VCall call = bytesCall(*comm, counts, env.rank, 7);
      std::vector<int64_t> sendcounts = call.buffers->sendcounts();
      if (env.rank == 1) sendcounts[2] -= 1;  // rank 2 expects one element more
      auto plan = startV(*box, call, bytes, bytes, static_cast<uint64_t>(scale), sendcounts);
      ASSERT_TRUE(plan.isOk()) << plan.status().toString();
      const Status status = (*plan)->wait(soon());
      const std::string where = "scale " + std::to_string(scale) + " rank " + std::to_string(env.rank);
      if (env.rank == 1 || env.rank == 2) {
        ASSERT_EQ(status.code(), Code::kInvalidArgument) << where << ": " << status.toString();
        EXPECT_NE(status.toString().find("rank 1 sends rank 2"), std::string::npos) << status.toString();
        EXPECT_EQ(call.buffers->check({env.rank == 1 ? 2 : 1}), "") << where;
      } else {
        ASSERT_TRUE(status.isOk()) << where << ": " << status.toString();
        EXPECT_EQ(call.buffers->check(), "") << where;
      }
      VCall next = startV(*box, counts, bytes, bytes, env.rank, 8);
      ASSERT_NE(next.plan, nullptr);
      ASSERT_TRUE(next.plan->wait(soon()).isOk()) << where;
      EXPECT_EQ(next.buffers->check(), "") << where;
    }
  });
}

// Rank 2's arguments are refused (a negative count): every rank's call
// fails (the others name rank 2), none runs the fallback although rank 0's
// blocks do not fit; the next call runs.
TEST(IalltoallvMailboxThreads, ARefusedCallFailsEveryRankAndTheNextCallRuns) {
  runRanks(3, testing::singleCopyFrom(0), [&](RankEnv& env) {
    auto [comm, box] = rankMailbox(env);
    ASSERT_NE(box, nullptr);
    const Side bytes = testing::byteSide(1);
    CountMatrix counts = testing::countMatrix(Spread::kAllEqual, 3, 5, 10);
    for (int64_t& count : counts[0]) count = 3000;  // rank 0's row holds 4 KiB
    VCall call = bytesCall(*comm, counts, env.rank, 5);
    std::vector<int64_t> sendcounts = call.buffers->sendcounts();
    if (env.rank == 2) sendcounts[0] = -1;
    auto plan = startV(*box, call, bytes, bytes, 1, sendcounts);
    ASSERT_TRUE(plan.isOk()) << plan.status().toString();
    const Status status = (*plan)->wait(soon());
    ASSERT_FALSE(status.isOk()) << "rank " << env.rank;
    if (env.rank != 2) {
      EXPECT_NE(status.toString().find("rank 2's arguments were refused"), std::string::npos) << status.toString();
    }
    EXPECT_EQ(call.fallback->built(), 0);
    expectNextCallRuns(*box, env.rank, 6);
  });
}

// Rank 1 cannot build its fallback: it breaks the mailbox, and every other
// rank's fallback, already running, fails instead of waiting for rank 1's
// messages; later calls fail at once.
TEST(IalltoallvMailboxThreads, AFallbackThatCannotStartOnOneRankFailsEveryRank) {
  runRanks(3, testing::singleCopyFrom(0), [&](RankEnv& env) {
    auto [comm, box] = rankMailbox(env);
    ASSERT_NE(box, nullptr);
    const Side bytes = testing::byteSide(1);
    const CountMatrix counts = testing::countMatrix(Spread::kAllEqual, 3, 9, 3000);  // 9 KB rows: the fallback
    VCall call = bytesCall(*comm, counts, env.rank, 9);
    if (env.rank == 1) call.fallback->failBuild();
    auto plan = startV(*box, call, bytes, bytes, 1, call.buffers->sendcounts());
    ASSERT_TRUE(plan.isOk()) << plan.status().toString();
    const Status status = (*plan)->wait(soon());
    ASSERT_FALSE(status.isOk()) << "rank " << env.rank;
    EXPECT_NE(status.code(), Code::kTimeout) << status.toString();
    if (env.rank != 1) {
      EXPECT_NE(status.toString().find("rank 1"), std::string::npos) << status.toString();
    }
    env.barrier();
    // Rank 1's mailbox is broken (nextV says so); the others' later call
    // waits for rank 1's row and learns that it broke.
    VCall later = bytesCall(*comm, testing::countMatrix(Spread::kAllEqual, 3, 10, 4), env.rank, 10);
    auto laterPlan = startV(*box, later, bytes, bytes, 2, later.buffers->sendcounts());
    const Status laterStatus = laterPlan.isOk() ? (*laterPlan)->wait(soon()) : laterPlan.status();
    EXPECT_FALSE(laterStatus.isOk()) << "rank " << env.rank;
    EXPECT_NE(laterStatus.code(), Code::kTimeout) << laterStatus.toString();
  });
}

// Rank 0 starts an alltoall where the others start an alltoallv: every
// rank's call fails, saying so, none runs a fallback; the next calls match.
TEST(IalltoallvMailboxThreads, RanksThatStartDifferentCollectivesFailAlike) {
  runRanks(3, testing::singleCopyFrom(0), [&](RankEnv& env) {
    auto [comm, box] = rankMailbox(env);
    ASSERT_NE(box, nullptr);
    const Side bytes = testing::byteSide(1);
    Status status;
    if (env.rank == 0) {
      const Side block = testing::byteSide(8);
      AlltoallBuffers regular(block, block, 3, env.rank);
      auto plan = box->next(checkAlltoallArgs(*comm, regular.sendbuf(), block.count, block.type, regular.recvbuf(),
                                              block.count, block.type));
      ASSERT_TRUE(plan.isOk());
      ASSERT_TRUE((*plan)->start().isOk());
      status = (*plan)->wait(soon());
    } else {
      VCall call = startV(*box, testing::countMatrix(Spread::kAllEqual, 3, 11, 2000), bytes, bytes, env.rank, 11);
      ASSERT_NE(call.plan, nullptr);
      status = call.plan->wait(soon());
      EXPECT_EQ(call.fallback->built(), 0);
    }
    ASSERT_EQ(status.code(), Code::kInvalidArgument) << "rank " << env.rank << ": " << status.toString();
    EXPECT_NE(status.toString().find("another collective"), std::string::npos) << status.toString();
    expectNextCallRuns(*box, env.rank, 12);
  });
}

// The pair views (448 bytes for 8 ranks) lie beside a row's capacity, so
// 256-byte rows still carry 256 bytes of an alltoallv's blocks, and one
// byte more runs the fallback; alltoall calls keep the whole capacity.
// (Where the segment's cap leaves no room beside the rows, from about 512
// ranks, alltoallv calls are refused alike on every rank: takesAlltoallv.)
TEST(IalltoallvMailboxThreads, ThePairViewsLieBesideTheRowsCapacity) {
  runRanks(8, testing::singleCopyFrom(0), [&](RankEnv& env) {
    auto comm = testing::world(env);
    ASSERT_NE(comm, nullptr);
    auto box = IalltoallMailbox::create(*comm, 256, soon());
    ASSERT_TRUE(box.isOk()) << box.status().toString();
    ASSERT_EQ((*box)->capacity(), 256);
    ASSERT_TRUE((*box)->takesAlltoallv());
    const Side bytes = testing::byteSide(1);
    for (int64_t extra : {0, 1}) {
      CountMatrix counts(8, std::vector<int64_t>(8, 32));  // 256 bytes per rank
      counts[3][5] += extra;
      VCall call = startV(**box, counts, bytes, bytes, env.rank, 14 + static_cast<uint64_t>(extra));
      ASSERT_NE(call.plan, nullptr);
      ASSERT_TRUE(call.plan->wait(soon()).isOk()) << "extra " << extra;
      EXPECT_EQ(call.buffers->check(), "") << "extra " << extra;
      EXPECT_EQ(call.fallback->built(), extra) << "rank " << env.rank;
    }
    const Side block = testing::byteSide(32);  // 8 x 32 bytes: the whole capacity
    AlltoallBuffers regular(block, block, 8, env.rank);
    auto plan = (*box)->next(checkAlltoallArgs(*comm, regular.sendbuf(), block.count, block.type, regular.recvbuf(),
                                               block.count, block.type));
    ASSERT_TRUE(plan.isOk());
    ASSERT_TRUE((*plan)->start().isOk());
    ASSERT_TRUE((*plan)->wait(soon()).isOk());
    EXPECT_EQ(regular.check(), "");
  });
}

}  // namespace
}  // namespace ibdt::collectives
