// The call mailbox's single copy (collectives/mailbox_single_copy.h), ranks
// as threads over the loopback fabric with the crossover forced: dense
// alltoall blocks are read out of the writers' send buffers (a mailbox
// that lends fitting calls too), into dense and strided receives, beside
// writers whose strided blocks go through their rows, several calls in
// flight, every byte checked; a writer's call completes only once its
// readers are through with its buffer, and a call that fits does not wait
// where the mailbox keeps fitting calls in rows (the bridge's); alltoallv
// calls far larger than a row fit when their dense blocks are lent,
// strided ones still run by messages; an address that cannot be read is a
// clear error naming the rank.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <memory>
#include <thread>
#include <vector>

#include "collectives/alltoall_args.h"
#include "collectives/alltoall_data.h"
#include "collectives/call_mailbox_ranks.h"
#include "collectives/ialltoall_mailbox.h"
#include "collectives/ialltoallv_calls.h"
#include "collectives/plan_checks.h"
#include "collectives/world.h"
#include "support/thread_ranks.h"

namespace ibdt::collectives {
namespace {

using messaging::testing::RankEnv;
using messaging::testing::runRanks;
using messaging::testing::soon;
using testing::AlltoallBuffers;
using testing::CountMatrix;
using testing::rankMailbox;
using testing::Side;
using testing::singleCopyFrom;
using testing::Spread;
using testing::VCall;

// False (the test skips) where this process cannot read itself by
// cross-memory attach (seccomp): the mailbox then never lends.
bool lends(const IalltoallMailbox& box) { return box.singleCopy().fromBytes() > 0; }

// Whether `plan` completes within 200 tests (a failed test counts as done).
bool completesWithin200Tests(Plan& plan) {
  for (int poll = 0; poll < 200; ++poll) {
    auto tested = plan.test();
    if (!tested.isOk() || *tested) return true;
  }
  return false;
}

// Five calls in flight (more than the four phases): dense blocks lent into
// dense and strided receives, and strided blocks through the rows of the
// same calls' writers; completed in different orders on different ranks.
TEST(SingleCopyThreads, AlltoallBlocksAreReadFromTheWritersBuffers) {
  for (int p : {1, 2, 3, 5}) {
    runRanks(p, singleCopyFrom(1), [&](RankEnv& env) {
      auto [comm, box] = rankMailbox(env, true);
      ASSERT_NE(box, nullptr);
      if (!lends(*box)) GTEST_SKIP() << "no cross-memory attach in this process";
      const Side strided = testing::vectorSide(2);
      const Side dense = testing::denseSide(strided.type, 2);
      const std::vector<std::pair<Side, Side>> shapes = {{testing::byteSide(8), testing::byteSide(8)},
                                                         {dense, strided},
                                                         {testing::byteSide(600), testing::byteSide(600)},
                                                         {strided, dense},
                                                         {testing::byteSide(1), testing::byteSide(1)}};
      for (int round = 0; round < 2; ++round) {
        std::vector<std::unique_ptr<AlltoallBuffers>> buffers;
        std::vector<Plan*> plans;
        for (const auto& [send, recv] : shapes) {
          if (p * send.bytes() > box->capacity()) continue;
          buffers.push_back(std::make_unique<AlltoallBuffers>(send, recv, p, env.rank));
          buffers.back()->refill(round);
          auto plan = testing::startCall(*box, *buffers.back());
          ASSERT_TRUE(plan.isOk()) << plan.status().toString();
          plans.push_back(*plan);
        }
        const bool odd = env.rank % 2 == 1;
        for (size_t i = 0; i < plans.size(); ++i) {
          const size_t k = odd ? plans.size() - 1 - i : i;
          const Status finished = testing::finishPlan(*plans[k], !odd);
          ASSERT_TRUE(finished.isOk()) << "p " << p << " rank " << env.rank << ": " << finished.toString();
          EXPECT_EQ(buffers[k]->check(), "") << "p " << p << " rank " << env.rank << " round " << round << " call " << k;
        }
      }
    });
  }
}

// Rank 1 starts its call (its row is out) and then stops until rank 0 has
// polled its own call 200 times. Lent, rank 0's call cannot complete: rank
// 1 has not read rank 0's buffer. Through the rows it completes, since
// everything it reads is in rank 1's row already: without single copy, and
// where the mailbox keeps calls that fit in their rows (the bridge's).
TEST(SingleCopyThreads, AWriterCompletesOnlyOnceEveryReaderReadItsBuffer) {
  struct Case {
    int64_t from;
    bool lendFittingCalls, lent;
  };
  for (Case c : {Case{1, true, true}, Case{0, true, false}, Case{1, false, false}}) {
    const int64_t from = c.from;
    std::atomic<int> stage{0};
    auto awaitStage = [&](int value) {
      while (stage.load() < value) std::this_thread::yield();
    };
    runRanks(2, singleCopyFrom(from), [&](RankEnv& env) {
      auto [comm, box] = rankMailbox(env, c.lendFittingCalls);
      ASSERT_NE(box, nullptr);
      if (c.lent && !lends(*box)) GTEST_SKIP() << "no cross-memory attach in this process";
      const Side side = testing::byteSide(512);
      AlltoallBuffers buffers(side, side, 2, env.rank);
      if (env.rank == 0) awaitStage(1);
      auto plan = testing::startCall(*box, buffers);
      ASSERT_TRUE(plan.isOk()) << plan.status().toString();
      if (env.rank == 1) {
        stage = 1;
        awaitStage(2);
      } else {
        EXPECT_EQ(completesWithin200Tests(**plan), !c.lent) << "single copy from " << from << " bytes, fitting calls lent "
                                 << c.lendFittingCalls;
        stage = 2;
      }
      ASSERT_TRUE((*plan)->wait(soon()).isOk());
      EXPECT_EQ(buffers.check(), "") << "rank " << env.rank << ", single copy from " << from;
    });
  }
}

// Every spread with pairs of up to ~40 KB against 4 KiB rows, on a mailbox
// that keeps fitting calls in rows (the bridge's): a rank whose blocks do
// not fit lends its dense blocks of 64 bytes and more, so the calls whose
// other blocks fit run without the fallback (counted); strided sends
// cannot lend and run by messages; dense into strided reads through a
// scratch block.
TEST(SingleCopyThreads, LargeDenseAlltoallvCallsFitByLendingTheirBlocks) {
  for (int p : {2, 3, 5}) {
    runRanks(p, singleCopyFrom(64), [&](RankEnv& env) {
      auto [comm, box] = rankMailbox(env);
      ASSERT_NE(box, nullptr);
      if (!lends(*box)) GTEST_SKIP() << "no cross-memory attach in this process";
      const Side bytes = testing::byteSide(1);
      const Side strided = testing::vectorSide(1);
      const Side dense = testing::denseSide(strided.type, 1);
      int lentPastARow = 0;
      for (Spread spread : testing::kSpreads) {
        const uint64_t seed = 40 + static_cast<uint64_t>(spread);
        const CountMatrix counts = testing::countMatrix(spread, p, seed, 2000);
        for (const auto& [send, recv] : {std::pair{bytes, bytes}, std::pair{dense, strided}, std::pair{strided, dense}}) {
          VCall call = testing::startV(*box, counts, send, recv, env.rank, seed);
          ASSERT_NE(call.plan, nullptr);
          const Status waited = call.plan->wait(soon());
          const std::string where = std::string(testing::spreadName(spread)) + " p " + std::to_string(p) +
                                    " rank " + std::to_string(env.rank) + " send " + std::to_string(send.bytes());
          ASSERT_TRUE(waited.isOk()) << where << ": " << waited.toString();
          EXPECT_EQ(call.buffers->check(), "") << where;
          EXPECT_EQ(call.fallback->built(), call.expectFallback ? 1 : 0) << where;
          int64_t sent = 0;
          for (int64_t count : counts[static_cast<size_t>(env.rank)]) sent += count * send.bytes();
          if (!call.expectFallback && sent > box->capacity()) ++lentPastARow;
        }
      }
      // The equal spread sends 2000 bytes to each peer: more than a row at p >= 3.
      if (p >= 3) {
        EXPECT_GT(lentPastARow, 0) << "rank " << env.rank;
      }
    });
  }
}

// Rank 1 dies once the mailbox is made. Rank 2 starts its call (lent) and
// stops; rank 0 starts its own and finds rank 1 dead: its call fails, but
// while rank 2, alive, has not read rank 0's lent buffer, it does not
// complete (200 polls), or the program could reuse the buffer under rank
// 2's read. Then rank 2 reads it (rank 0's row comes first in its order),
// every byte right, and both fail with the death, not at the deadline.
TEST(SingleCopyThreads, AFailedWriterKeepsItsBufferUntilLiveReadersAreThrough) {
  constexpr int kRanks = 3, kDead = 1, kReader = 2;
  std::atomic<int> stage{0};
  auto awaitStage = [&](int value) {
    while (stage.load() < value) std::this_thread::yield();
  };
  messaging::testing::runRanksThatMayDie(
      kRanks,
      [&](messaging::testing::Ranks& ranks, int rank, std::barrier<>& made) {
        auto comm = testing::world(*ranks.contexts[static_cast<size_t>(rank)]);
        std::shared_ptr<IalltoallMailbox> box = comm ? testing::mailboxOf(*comm, testing::kMailboxCapacity, true)
                                                     : nullptr;
        made.arrive_and_wait();
        if (rank == kDead) {
          testing::dieHere(ranks, rank, comm, box);
          return;
        }
        ASSERT_NE(box, nullptr);
        const bool lent = lends(*box);
        const Side side = testing::byteSide(512);
        AlltoallBuffers buffers(side, side, kRanks, rank);
        if (rank == 0) awaitStage(1);
        auto plan = testing::startCall(*box, buffers);
        ASSERT_TRUE(plan.isOk()) << plan.status().toString();
        if (rank == kReader) {
          stage = 1;
          awaitStage(2);
        } else {
          const bool done = completesWithin200Tests(**plan);
          if (lent) {
            EXPECT_FALSE(done) << "rank 0 completed while rank 2 may still read its buffer";
          }
          stage = 2;
        }
        const Status status = (*plan)->wait(soon());
        ASSERT_FALSE(status.isOk()) << "rank " << rank;
        EXPECT_NE(status.code(), Code::kTimeout) << status.toString();
        if (rank == kReader) {
          EXPECT_EQ(buffers.check({kDead}), "") << "rank 2's blocks from the live ranks";
        }
      },
      singleCopyFrom(1));
}

// A peer's address that is not mapped: the read fails with a clear error
// naming the rank, and writes nothing past what it was given.
TEST(SingleCopyThreads, AnAddressThatCannotBeReadIsAClearError) {
  runRanks(2, singleCopyFrom(1), [&](RankEnv& env) {
    auto [comm, box] = rankMailbox(env);
    ASSERT_NE(box, nullptr);
    if (!lends(*box)) GTEST_SKIP() << "no cross-memory attach in this process";
    if (env.rank != 0) return;
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void* gone = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(gone, MAP_FAILED);
    ASSERT_EQ(munmap(gone, page), 0);
    std::vector<std::byte> into(page + 16, std::byte{0x5a});
    const Status read = box->singleCopy().read(1, reinterpret_cast<uint64_t>(gone), static_cast<int64_t>(page),
                                               into.data());
    ASSERT_FALSE(read.isOk());
    EXPECT_NE(read.toString().find("rank 1's buffer"), std::string::npos) << read.toString();
    EXPECT_NE(read.toString().find("cross-memory attach"), std::string::npos) << read.toString();
    EXPECT_EQ(into[page], std::byte{0x5a});
  });
}

}  // namespace
}  // namespace ibdt::collectives
