// IBDT_MSG_EAGER_POOL: eager buffers from one bounded pool per rank, granted
// to peers that run out of credits and taken back when they stop using them
// (transport/messaging/eager_pool.h, docs/many-ranks.md). A peer's credits
// are read exactly, as the messages it gets through to a receiver that does
// not progress; never timings.
#include "transport/messaging/eager_pool.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "support/flood_exchange.h"
#include "support/scoped_env.h"
#include "support/thread_ranks.h"
#include "transport/messaging/credit_flow.h"
#include "transport/messaging/eager_budget.h"

namespace ibdt::messaging::testing {
namespace {

using datatype::Datatype;
constexpr uint32_t kReserve = CreditFlow::kReserveSlots;

TEST(EagerPool, GrantsDoubleUpToTheCeilingOnlyWhileAskedAndComeBackDownToTheShare) {
  EagerPool pool;
  pool.init(4, /*guaranteed=*/2, /*ceiling=*/16, /*extraSlots=*/100);
  for (int rank = 0; rank < 4; ++rank) pool.open(rank);
  // Not asked: returned as it was.
  EXPECT_FALSE(pool.decide(1, false, 100).retain);
  EXPECT_EQ(pool.decide(1, false, 100).grant, 0u);
  pool.heard(1, /*wantsCredits=*/true);
  std::vector<uint32_t> grants;
  for (int i = 0; i < 6; ++i) grants.push_back(pool.decide(1, false, 100).grant);
  EXPECT_EQ(grants, (std::vector<uint32_t>{2, 4, 8, 0, 0, 0}));  // 2 -> 4 -> 8 -> 16, the ceiling
  EXPECT_EQ(pool.granted(1), 16u);
  // No longer asked and nobody else asks: it keeps them.
  pool.heard(1, false);
  EXPECT_FALSE(pool.decide(1, false, 100).retain);
  // Another asks: every buffer rank 1 consumes stays in the pool, down to the share.
  pool.heard(2, true);
  int retained = 0;
  for (int i = 0; i < 20; ++i) retained += pool.decide(1, false, 100).retain ? 1 : 0;
  EXPECT_EQ(retained, 14);
  EXPECT_EQ(pool.granted(1), 2u);
  // A give-back at the share is a credit like any other.
  EXPECT_FALSE(pool.decide(1, /*givenBack=*/true, 100).retain);
}

TEST(EagerPool, AnEmptyPoolAsksTheIdleHoldersAndAskersShareFairly) {
  EagerPool pool;
  pool.init(4, /*guaranteed=*/2, /*ceiling=*/32, /*extraSlots=*/20);
  for (int rank = 0; rank < 4; ++rank) pool.open(rank);
  pool.heard(1, true);
  EXPECT_EQ(pool.decide(1, false, 20).grant, 2u);
  EXPECT_EQ(pool.decide(1, false, 18).grant, 4u);
  EXPECT_EQ(pool.decide(1, false, 14).grant, 8u);
  EXPECT_EQ(pool.granted(1), 16u);
  pool.heard(1, false);  // rank 1 goes quiet holding 14 beyond its share
  pool.heard(2, true);
  EXPECT_EQ(pool.decide(2, false, 6).grant, 2u);
  EXPECT_EQ(pool.decide(2, false, 4).grant, 4u);
  EXPECT_EQ(pool.decide(2, false, 0).grant, 0u);  // short: rank 1 is asked back, once
  EXPECT_EQ(pool.newlyAsked(), (std::vector<int>{1}));
  EXPECT_TRUE(pool.reclaimDue(1));
  pool.reclaimSent(1);
  EXPECT_EQ(pool.decide(2, false, 0).grant, 0u);
  EXPECT_TRUE(pool.newlyAsked().empty());
  // Two askers: neither grows past the guaranteed share plus half the extra.
  pool.heard(1, true);
  pool.heard(3, true);
  EXPECT_EQ(pool.decide(3, false, 20).grant, 2u);
  for (int i = 0; i < 4; ++i) (void)pool.decide(3, false, 20);
  EXPECT_EQ(pool.granted(3), 2u + 20u / 3u);  // three ask now: 2 + 20 / 3
  EXPECT_TRUE(pool.decide(1, false, 0).retain) << "16 is above the fair share of 8 while others ask";
}

TEST(EagerPool, TheShapeKeepsEveryShareAndBoundsThePoolByTheBudget) {
  const uint64_t budget = 16u << 20;
  for (int ranks : {2, 16, 64, 128}) {
    const uint64_t slot = eagerSlotBytes(ranks == 128 ? 16384 : 32768);
    EagerPoolShape shape = eagerPoolWithin(budget, slot, ranks, 32);
    EXPECT_EQ(shape.ceiling, 32u);
    EXPECT_GE(shape.guaranteed, kMinEagerCredits);
    EXPECT_LE(shape.slots * slot, budget) << ranks << " ranks";
    EXPECT_GE(shape.slots, uint64_t{static_cast<uint32_t>(ranks)} * (shape.guaranteed + kReserve));
  }
  EXPECT_EQ(eagerPoolWithin(budget, eagerSlotBytes(32768), 2, 32).guaranteed, 32u);  // all fit
  EXPECT_EQ(eagerPoolWithin(budget, eagerSlotBytes(32768), 16, 32).guaranteed, 11u);  // half spread
  EXPECT_EQ(eagerPoolWithin(budget, eagerSlotBytes(32768), 64, 32).guaranteed, 2u);
  // Where even the shares exceed the budget, the shares are the pool.
  EagerPoolShape over = eagerPoolWithin(1, 1000, 8, 32);
  EXPECT_EQ(over.guaranteed, kMinEagerCredits);
  EXPECT_EQ(over.slots, 8 * (kMinEagerCredits + kReserve));
}

TEST(EagerPool, BadValuesAreRefused) {
  test::ScopedEnv env("IBDT_MSG_EAGER_POOL", "maybe");
  auto on = eagerPoolFromEnvironment();
  ASSERT_FALSE(on.isOk());
  EXPECT_NE(on.status().toString().find("IBDT_MSG_EAGER_POOL"), std::string::npos);
}

// A receiver's CreditFlow with every buffer reposted at once and the pool
// never short: what it sends a peer that spends its credits without
// reading what comes back (its messages always asking for more).
class PoolHost final : public CreditFlow::Host {
 public:
  Status repostBuffer(int, uint64_t) override { return Status::ok(); }
  bool peerFailed(int) const override { return false; }
  void failPeer(int, Status) override {}
  bool mayWithhold(int) const override { return false; }
  uint64_t grantableBuffers() const override { return 1000; }
  Result<bool> grantBuffer(int) override { return true; }
};

TEST(EagerPool, AtMostTwoCreditOnlyMessagesGoToAPeerThatDoesNotReadThemWhileItsGrantsDouble) {
  // The reserve (4 buffers) holds the credit-only messages a peer has not
  // reposted yet: at most two in flight plus those it handled in its last
  // progress (docs/many-ranks.md, the shared eager pool, point 6). A grant used to count
  // toward the batch, and while a peer's grant doubled every repost made a
  // credit-only message due: 3 in flight from 4 credits, more with reclaims.
  for (uint32_t share = 2; share <= 16; ++share) {
    Counters counters;
    CreditFlow credits(counters);
    PoolHost host;
    credits.init(2, /*self=*/0, share);
    credits.enablePool(/*ceiling=*/32, /*extraBuffers=*/1000);
    credits.reset(1);
    wire::Header asking{wire::Kind::kEager, wire::kWantsCredits, {}, 0};
    uint32_t creditOnly = 0;
    for (uint32_t spent = 0; spent < share; ++spent) {  // one message per progress
      ASSERT_TRUE(credits.returned(1, asking).isOk());
      credits.consumed(host, 1, spent, CreditFlow::Use::kCredit);
      credits.repostConsumed(host, /*dueOnly=*/false);
      if (credits.due(1)) {
        credits.sent(1, /*spendsCredit=*/false);
        ++creditOnly;
      }
    }
    EXPECT_LE(creditOnly, 2u) << "share " << share;
    // It spent all it knew of: it gets credits from a message in flight or
    // is owed them now (no deadlock).
    EXPECT_TRUE(creditOnly > 0 || credits.due(1)) << "share " << share;
    EXPECT_GT(counters.creditsGranted, 0u);
  }
}

// A budget of `slots` eager buffers for `ranks` under budgetOptions().
std::string budgetOfSlots(uint64_t slots) { return std::to_string(slots * eagerSlotBytes(budgetOptions().eagerLimit)); }

TEST(EagerPool, AFloodGetsGrantsArrivesInOrderAndStarvesNobody) {
  // 4 ranks keep 2 credits each; 30 more buffers for whoever asks.
  test::ScopedEnv pool("IBDT_MSG_EAGER_POOL", "on");
  test::ScopedEnv memory("IBDT_MSG_EAGER_MEMORY", budgetOfSlots(4 * (2 + kReserve) + 30).c_str());
  Ranks ranks = createRanks(4, budgetOptions());
  floodWithExchanges(ranks, 9, 96);
  EXPECT_GT(ranks.contexts[0]->counters().creditsGranted, 0u);
}

// `from` queues `count` messages to `to`, which does not progress meanwhile:
// the messages that get through are `from`'s credits at `to`. Then `to`
// takes them all, in order, every byte checked (which itself may change the
// credits: those messages are a burst).
uint64_t creditsOf(Ranks& ranks, int from, int to, int count) {
  Context& sender = *ranks.contexts[static_cast<size_t>(from)];
  Context& receiver = *ranks.contexts[static_cast<size_t>(to)];
  std::vector<std::vector<uint8_t>> sent, got;
  std::vector<Transfer> transfers;
  for (int i = 0; i < count; ++i) {
    sent.push_back(payload(from, i, 64 + i));
    auto request = sender.isend(sent.back().data(), 64 + i, Datatype::of<uint8_t>(), to, 5);
    EXPECT_TRUE(request.isOk());
    if (request.isOk()) transfers.push_back({&sender, std::move(*request)});
  }
  const uint64_t before = receiver.counters().unexpected;
  for (int i = 0; i < 200; ++i) EXPECT_TRUE(sender.progress().isOk());
  for (int i = 0; i < 200; ++i) EXPECT_TRUE(receiver.progress().isOk());
  const uint64_t arrived = receiver.counters().unexpected - before;
  for (int i = 0; i < count; ++i) {
    got.emplace_back(static_cast<size_t>(64 + i), 0);
    auto request = receiver.irecv(got.back().data(), 64 + i, Datatype::of<uint8_t>(), from, 5);
    EXPECT_TRUE(request.isOk());
    if (request.isOk()) transfers.push_back({&receiver, std::move(*request)});
  }
  EXPECT_TRUE(progressUntil(ranks, transfers));
  for (size_t i = 0; i < sent.size(); ++i) EXPECT_EQ(got[i], sent[i]) << "message " << i;
  return arrived;
}

// `count` messages of 64 bytes from `from` to `to` (tag `tag`), every byte
// checked; progress only as much as they need.
void sendAll(Ranks& ranks, int from, int to, int tag, int count) {
  Context& sender = *ranks.contexts[static_cast<size_t>(from)];
  Context& receiver = *ranks.contexts[static_cast<size_t>(to)];
  std::vector<std::vector<uint8_t>> sent, got;
  std::vector<Transfer> transfers;
  for (int i = 0; i < count; ++i) {
    got.emplace_back(64, 0);
    auto request = receiver.irecv(got.back().data(), 64, Datatype::of<uint8_t>(), from, tag);
    ASSERT_TRUE(request.isOk());
    transfers.push_back({&receiver, std::move(*request)});
  }
  for (int i = 0; i < count; ++i) {
    sent.push_back(payload(from, i, 64));
    auto request = sender.isend(sent.back().data(), 64, Datatype::of<uint8_t>(), to, tag);
    ASSERT_TRUE(request.isOk());
    transfers.push_back({&sender, std::move(*request)});
  }
  ASSERT_TRUE(progressUntil(ranks, transfers));
  for (size_t i = 0; i < sent.size(); ++i) EXPECT_EQ(got[i], sent[i]) << "message " << i;
}

// 3 ranks under the pool that keep 2 credits each (and the reserve), with a
// ceiling of 16 and `extra` more buffers to grant.
Ranks threeRanksSharing(uint64_t extra) {
  Options options = budgetOptions();
  options.eagerCredits = 16;
  test::ScopedEnv pool("IBDT_MSG_EAGER_POOL", "on");
  test::ScopedEnv memory("IBDT_MSG_EAGER_MEMORY", budgetOfSlots(3 * (2 + kReserve) + extra).c_str());
  EXPECT_EQ(eagerPoolWithin(3 * (2 + kReserve) + extra, 1, 3, 16).guaranteed, 2u);
  return createRanks(3, options);
}

TEST(EagerPool, ABusyPeersCreditsGrowAndShrinkBackOnceItIsIdleAndAnotherNeedsThem) {
  // 14 buffers to grant: one peer at the ceiling of 16, not two.
  Ranks ranks = threeRanksSharing(14);
  for (auto& context : ranks.contexts) ASSERT_NE(context, nullptr);
  // Rank 0 starts at its share, and the burst behind it is granted more: up
  // to the ceiling, less what the receiver has not returned yet (under a
  // batch of half its credits).
  EXPECT_EQ(creditsOf(ranks, 0, 1, 40), 2u);
  EXPECT_GT(ranks.contexts[1]->counters().creditsGranted, 0u);
  const uint64_t grown = creditsOf(ranks, 0, 1, 40);
  EXPECT_GT(grown, 16u / 2) << "a busy peer's credits grew beyond its share";
  EXPECT_LE(grown, 16u);
  // Rank 0 goes idle holding more than its share; rank 2 bursts and the pool
  // is short: rank 0 is asked (kReclaim, with the next message to it) and
  // gives back what it holds beyond its share.
  const uint64_t takenBefore = ranks.contexts[1]->counters().creditsTakenBack;
  EXPECT_EQ(creditsOf(ranks, 2, 1, 60), 2u);
  sendAll(ranks, 1, 0, 6, 1);
  for (int i = 0; i < 100; ++i) {
    for (auto& context : ranks.contexts) ASSERT_TRUE(context->progress().isOk());
  }
  EXPECT_GT(ranks.contexts[1]->counters().creditsTakenBack, takenBefore);
  EXPECT_GT(ranks.contexts[0]->counters().creditsGivenBack, 0u);
  EXPECT_LE(ranks.contexts[0]->counters().creditsGivenBack, 14u);
  EXPECT_EQ(creditsOf(ranks, 0, 1, 3), 2u) << "the idle peer is back at its share";
}

TEST(EagerPool, CreditsOwedToAPeerWhoseGrantShrinksGoBackWithoutAnotherArrival) {
  // The hang of the Bruck radix-4 thread test under the pool
  // (docs/many-ranks.md, the shared eager pool, point 7): credits owed to a peer below
  // its batch (half its grant) were not sent on their own, as they should
  // not be; then its buffers were kept in the pool, its grant and with it
  // its batch shrank below what was owed, and nothing visited it again. Its
  // next message waited for those credits forever.
  // 23 buffers to grant: A can hold 16, C be granted too.
  Ranks ranks = threeRanksSharing(23);
  for (auto& context : ranks.contexts) ASSERT_NE(context, nullptr);
  constexpr int kA = 0, kR = 1, kC = 2;
  Context& receiver = *ranks.contexts[kR];
  // A bursts until it holds the ceiling at R (granted 14 beyond its share;
  // nobody else asks, so nothing is taken back).
  for (int i = 0; i < 8 && receiver.counters().creditsGranted < 14; ++i) (void)creditsOf(ranks, kA, kR, 40);
  ASSERT_EQ(receiver.counters().creditsGranted, 14u);
  // R answers A once: what it owed A goes back in the header.
  sendAll(ranks, kR, kA, 6, 1);
  // A sends 5: R owes 5, under A's batch of 8, so they wait for a message to A.
  sendAll(ranks, kA, kR, 7, 5);
  // C asks for credits (its third message waits for its first two's).
  sendAll(ranks, kC, kR, 8, 3);
  // A spends the rest without asking while C asks: R keeps every buffer in
  // the pool (A's grant 16 -> 5, its batch 8 -> 2: the 5 owed are due).
  const uint64_t keptBefore = receiver.counters().creditsTakenBack;
  sendAll(ranks, kA, kR, 9, 11);
  EXPECT_EQ(receiver.counters().creditsTakenBack - keptBefore, 11u);
  // A's next message needs those credits; R has nothing to send to A.
  std::vector<uint8_t> sent = payload(kA, 99, 64), got(64, 0);
  std::vector<Transfer> last;
  auto recv = receiver.irecv(got.data(), 64, Datatype::of<uint8_t>(), kA, 10);
  auto send = ranks.contexts[kA]->isend(sent.data(), 64, Datatype::of<uint8_t>(), kR, 10);
  ASSERT_TRUE(recv.isOk() && send.isOk());
  last.push_back({&receiver, std::move(*recv)});
  last.push_back({ranks.contexts[kA].get(), std::move(*send)});
  bool done = false;
  for (int round = 0; round < 2000 && !done; ++round) {
    for (auto& context : ranks.contexts) ASSERT_TRUE(context->progress().isOk());
    done = finished(last) == last.size();
  }
  ASSERT_TRUE(done) << "R never sent A the credits it owed";
  EXPECT_EQ(got, sent);
}

}  // namespace
}  // namespace ibdt::messaging::testing
