// The alltoallv mailbox (collectives/alltoallv_mailbox.h) with ranks as
// threads: one mailbox per communicator, then calls whose counts, types and
// buffers change from call to call with no agreement between the ranks:
// every spread, out of place (bytes; strided -> dense) and in place, every
// byte checked; a call whose blocks do not fit one rank's row comes back on
// every rank and leaves every buffer untouched; a refused rank, a pair
// whose sides disagree and a dead rank end the call with an error on the
// ranks they concern, never a hang.
#include <gtest/gtest.h>

#include <barrier>
#include <functional>
#include <thread>

#include "collectives/alltoallv_args.h"
#include "collectives/alltoallv_data.h"
#include "collectives/alltoallv_mailbox.h"
#include "collectives/world.h"
#include "support/thread_ranks.h"

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

MailboxCall prepared(Communicator& comm, AlltoallvBuffers& buffers, const Side& send, const Side& recv) {
  return MailboxCall::prepare(checkAlltoallvArgs(comm, buffers.sendbuf(), buffers.sendcounts(), buffers.sdispls(),
                                                 send.type, buffers.recvbuf(), buffers.recvcounts(),
                                                 buffers.rdispls(), recv.type));
}

MailboxCall prepared(Communicator& comm, InPlaceBuffer& buffer, const Datatype& item) {
  return MailboxCall::prepare(checkAlltoallvArgs(comm, kInPlace, buffer.sendcounts(), buffer.sdispls(), Datatype(),
                                                 buffer.buffer(), buffer.recvcounts(), buffer.rdispls(), item));
}

// Runs `call` twice on fresh data (`reset`), every byte checked (`check`).
void runTwice(RankEnv& env, AlltoallvMailbox& mailbox, MailboxCall& call, const std::function<void()>& reset,
              const std::function<std::string()>& check, const std::string& where) {
  for (int run = 0; run < 2; ++run) {
    reset();
    env.barrier();
    Status outcome;
    auto ran = mailbox.run(call, soon(), outcome);
    ASSERT_TRUE(ran.isOk()) << where << ": " << ran.status().toString();
    ASSERT_TRUE(*ran) << where;
    ASSERT_TRUE(outcome.isOk()) << where << ": " << outcome.toString();
    EXPECT_EQ(check(), "") << where << " run " << run;
  }
}

class MailboxThreads : public ::testing::TestWithParam<int> {};

// Every call another problem (spread, types, in place or not), the same
// mailbox; each run twice where it is kept, as the MPI bridge keeps it.
TEST_P(MailboxThreads, EveryCallItsOwnArgumentsEveryByteRight) {
  const int size = GetParam();
  runRanks(size, {}, [&](RankEnv& env) {
    auto comm = testing::world(env);
    ASSERT_NE(comm, nullptr);
    auto mailbox = AlltoallvMailbox::create(*comm, int64_t{1} << 20);
    ASSERT_TRUE(mailbox.isOk()) << mailbox.status().toString();
    ASSERT_NE(*mailbox, nullptr);
    const Side bytes = testing::byteSide(1), strided = testing::vectorSide(1);
    const Side dense = testing::denseSide(strided.type, 1);
    uint64_t seed = 100 * static_cast<uint64_t>(size);
    for (Spread spread : testing::kSpreads) {
      for (int form = 0; form < 3; ++form) {
        const std::string where = std::string(testing::spreadName(spread)) + " form " + std::to_string(form);
        const CountMatrix counts = testing::countMatrix(spread, size, ++seed, form == 1 ? 40 : 900);
        if (form == 2) {
          InPlaceBuffer buffer(counts, 4, env.rank, seed);
          MailboxCall call = prepared(*comm, buffer, Datatype::of<int32_t>());
          runTwice(env, **mailbox, call, [&] { buffer.refill(); }, [&] { return buffer.check(); }, where);
          continue;
        }
        const Side& send = form == 0 ? bytes : strided;
        const Side& recv = form == 0 ? bytes : dense;
        AlltoallvBuffers buffers(counts, send, recv, env.rank, seed);
        MailboxCall call = prepared(*comm, buffers, send, recv);
        runTwice(env, **mailbox, call, [&] { buffers.clearReceive(); }, [&] { return buffers.check(); }, where);
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, MailboxThreads, ::testing::Values(2, 3, 4, 5, 8),
                         [](const auto& ranks) { return "np" + std::to_string(ranks.param); });

// The blocking alltoallv() with auto on one node: the communicator's
// mailbox, made by the first call; every spread and type pair, in place
// too, each call its own problem; calls larger than a row run their plan
// (alike on every rank), every byte checked either way.
TEST_P(MailboxThreads, TheBlockingCallGoesThroughTheCommunicatorsMailbox) {
  const int size = GetParam();
  runRanks(size, {}, [&](RankEnv& env) {
    auto comm = testing::world(env);
    ASSERT_NE(comm, nullptr);
    const Side bytes = testing::byteSide(1), strided = testing::vectorSide(1);
    const Side dense = testing::denseSide(strided.type, 1);
    AlltoallvOptions options;
    options.inplaceBytes = 64 << 10;  // rows of 32 KiB: the large calls below do not fit
    uint64_t seed = 300 * static_cast<uint64_t>(size);
    for (Spread spread : testing::kSpreads) {
      for (int64_t scale : {int64_t{40}, int64_t{20000}}) {
        const std::string where = std::string(testing::spreadName(spread)) + " scale " + std::to_string(scale);
        const CountMatrix counts = testing::countMatrix(spread, size, ++seed, scale);
        AlltoallvBuffers plain(counts, bytes, bytes, env.rank, seed), typed(counts, strided, dense, env.rank, seed);
        InPlaceBuffer single(counts, 4, env.rank, seed);
        for (AlltoallvBuffers* buffers : {&plain, &typed}) {
          const Side& send = buffers == &plain ? bytes : strided;
          const Side& recv = buffers == &plain ? bytes : dense;
          Status status = alltoallv(*comm, buffers->sendbuf(), buffers->sendcounts(), buffers->sdispls(), send.type,
                                    buffers->recvbuf(), buffers->recvcounts(), buffers->rdispls(), recv.type,
                                    options, soon());
          ASSERT_TRUE(status.isOk()) << where << ": " << status.toString();
          EXPECT_EQ(buffers->check(), "") << where;
        }
        Status status = alltoallv(*comm, kInPlace, single.sendcounts(), single.sdispls(), Datatype(), single.buffer(),
                                  single.recvcounts(), single.rdispls(), Datatype::of<int32_t>(), options, soon());
        ASSERT_TRUE(status.isOk()) << where << " in place: " << status.toString();
        EXPECT_EQ(single.check(), "") << where << " in place";
      }
    }
    EXPECT_EQ(comm->algorithmCounts().at("alltoallv").at("mailbox").plans, size > 1 ? 1u : 0u);
  });
}

// Rank 2 alone sends more than its row holds: every rank gets the call
// back, no buffer was written (in place included); the next call fits.
TEST(Mailbox, ACallThatDoesNotFitOneRowComesBackOnEveryRank) {
  runRanks(4, {}, [&](RankEnv& env) {
    auto comm = testing::world(env);
    ASSERT_NE(comm, nullptr);
    // Each rank passes another budget: the smallest row (8 KiB) serves all.
    auto mailbox = AlltoallvMailbox::create(*comm, 16384 + 4096 * env.rank);
    ASSERT_TRUE(mailbox.isOk() && *mailbox != nullptr);
    const int64_t capacity = (*mailbox)->capacity();
    EXPECT_EQ(capacity, 8192);
    CountMatrix counts = testing::countMatrix(Spread::kAllEqual, 4, 3, 16);
    counts[2][1] = capacity;  // rank 2's row: capacity plus its other blocks
    for (bool inPlace : {false, true}) {
      Status outcome;
      const Side bytes = testing::byteSide(1);
      AlltoallvBuffers buffers(counts, bytes, bytes, env.rank, 3);
      InPlaceBuffer buffer(counts, 1, env.rank, 3);
      MailboxCall call = inPlace ? prepared(*comm, buffer, Datatype::of<uint8_t>())
                                 : prepared(*comm, buffers, bytes, bytes);
      EXPECT_EQ(call.rowBytes() > capacity, env.rank == 2);
      auto ran = (*mailbox)->run(call, soon(), outcome);
      ASSERT_TRUE(ran.isOk()) << ran.status().toString();
      EXPECT_FALSE(*ran);
      if (inPlace) {
        EXPECT_EQ(buffer.raw(), InPlaceBuffer(counts, 1, env.rank, 3).raw());  // nothing was written
      } else {
        EXPECT_EQ(buffers.check({0, 1, 2, 3}), "");  // nothing was written
      }
    }
    const Side bytes = testing::byteSide(1);
    AlltoallvBuffers small(testing::countMatrix(Spread::kRandom, 4, 4, 30), bytes, bytes, env.rank, 4);
    MailboxCall call = prepared(*comm, small, bytes, bytes);
    Status outcome;
    auto ran = (*mailbox)->run(call, soon(), outcome);
    ASSERT_TRUE(ran.isOk() && *ran && outcome.isOk()) << outcome.toString();
    EXPECT_EQ(small.check(), "");
  });
}

// A refused rank (a negative count) fails every rank's call; a pair whose
// sides disagree fails on its two ranks only, naming the peer, while the
// other pairs arrive; the mailbox serves the next call.
TEST(Mailbox, RefusalsAndMismatchesEndTheCallNotTheMailbox) {
  runRanks(4, {}, [&](RankEnv& env) {
    auto comm = testing::world(env);
    ASSERT_NE(comm, nullptr);
    auto mailbox = AlltoallvMailbox::create(*comm, int64_t{1} << 20);
    ASSERT_TRUE(mailbox.isOk() && *mailbox != nullptr);
    const Side ints = testing::denseSide(Datatype::of<int32_t>(), 1);
    CountMatrix counts = testing::countMatrix(Spread::kRandom, 4, 7, 50);
    AlltoallvBuffers buffers(counts, ints, ints, env.rank, 7);
    std::vector<int64_t> negative = buffers.sendcounts();
    if (env.rank == 3) negative[0] = -1;
    MailboxCall refused = MailboxCall::prepare(checkAlltoallvArgs(
        *comm, buffers.sendbuf(), negative, buffers.sdispls(), ints.type, buffers.recvbuf(), buffers.recvcounts(),
        buffers.rdispls(), ints.type));
    Status outcome;
    auto ran = (*mailbox)->run(refused, soon(), outcome);
    ASSERT_TRUE(ran.isOk() && *ran) << ran.status().toString();
    ASSERT_FALSE(outcome.isOk());
    EXPECT_NE(outcome.toString().find(env.rank == 3 ? "negative send count" : "rank 3's arguments were refused"),
              std::string::npos)
        << outcome.toString();
    EXPECT_EQ(buffers.check({0, 1, 2, 3}), "");  // nothing was written
    if (env.rank == 0) counts[1][0] += 1;  // only rank 0 believes it
    AlltoallvBuffers skewed(counts, ints, ints, env.rank, 8);
    MailboxCall call = prepared(*comm, skewed, ints, ints);
    ran = (*mailbox)->run(call, soon(), outcome);
    ASSERT_TRUE(ran.isOk() && *ran) << ran.status().toString();
    if (env.rank <= 1) {
      ASSERT_FALSE(outcome.isOk());
      EXPECT_NE(outcome.toString().find("rank 1 sends rank 0"), std::string::npos) << outcome.toString();
      EXPECT_EQ(skewed.check(env.rank == 0 ? std::vector<int>{1} : std::vector<int>{0}), "");
    } else {
      EXPECT_TRUE(outcome.isOk()) << outcome.toString();
      EXPECT_EQ(skewed.check(), "");
    }
    const CountMatrix fewer = testing::countMatrix(Spread::kFewPeers, 4, 9, 50);
    AlltoallvBuffers after(fewer, ints, ints, env.rank, 9);
    MailboxCall good = prepared(*comm, after, ints, ints);
    for (int run = 0; run < 2; ++run) {  // the second run on the pairs checked in the first
      after.clearReceive();
      env.barrier();
      ran = (*mailbox)->run(good, soon(), outcome);
      ASSERT_TRUE(ran.isOk() && *ran && outcome.isOk()) << outcome.toString();
      EXPECT_EQ(after.check(), "");
    }
    // Rank 1 alone changes its call (one element more for rank 0); the
    // others repeat theirs, whose pairs with rank 1 they had checked: the
    // pair is checked again and fails on both of its ranks.
    CountMatrix more = fewer;
    more[1][0] += 1;
    AlltoallvBuffers changed(more, ints, ints, env.rank, 9);
    MailboxCall other = prepared(*comm, changed, ints, ints);
    after.clearReceive();
    env.barrier();
    ran = (*mailbox)->run(env.rank == 1 ? other : good, soon(), outcome);
    ASSERT_TRUE(ran.isOk() && *ran) << ran.status().toString();
    if (env.rank <= 1) {
      ASSERT_FALSE(outcome.isOk());
      EXPECT_NE(outcome.toString().find("rank 1 sends rank 0"), std::string::npos) << outcome.toString();
    } else {
      EXPECT_TRUE(outcome.isOk()) << outcome.toString();
      EXPECT_EQ(after.check(), "");
    }
  });
}

// Rank 2 dies after the mailbox was made: every survivor's next call ends
// with an error naming it, not the deadline, and the mailbox stays broken.
TEST(Mailbox, ADeadRankFailsEverySurvivor) {
  constexpr int kRanks = 4, kDead = 2;
  messaging::testing::runRanksThatMayDie(kRanks, [&](messaging::testing::Ranks& ranks, int rank, std::barrier<>& made) {
    auto comm = Communicator::create(*ranks.contexts[static_cast<size_t>(rank)]);
    ASSERT_TRUE(comm.isOk());
    auto mailbox = AlltoallvMailbox::create(**comm, int64_t{1} << 20);
    made.arrive_and_wait();
    ASSERT_TRUE(mailbox.isOk() && *mailbox != nullptr);
    if (rank == kDead) {
      messaging::testing::killLoopbackDomain(*ranks.domains[static_cast<size_t>(rank)]);
      mailbox->reset();
      comm->reset();
      ranks.contexts[static_cast<size_t>(rank)].reset();
      return;
    }
    const Side bytes = testing::byteSide(1);
    AlltoallvBuffers buffers(testing::countMatrix(Spread::kRandom, kRanks, 5, 100), bytes, bytes, rank, 5);
    MailboxCall call = prepared(**comm, buffers, bytes, bytes);
    Status outcome;
    auto ran = (*mailbox)->run(call, Deadline::after(std::chrono::seconds(60)), outcome);
    ASSERT_FALSE(ran.isOk()) << "rank " << rank;
    EXPECT_NE(ran.status().code(), Code::kTimeout) << ran.status().toString();
    EXPECT_NE(ran.status().toString().find("rank 2"), std::string::npos) << ran.status().toString();
    EXPECT_FALSE((*mailbox)->run(call, soon(), outcome).isOk());
  });
}

}  // namespace
}  // namespace ibdt::collectives
