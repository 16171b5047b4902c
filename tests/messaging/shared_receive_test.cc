// Eager buffers in one pool under a shared receive queue
// (transport/messaging/receive_pool.h, docs/many-ranks.md), over the
// loopback fabric's shared queues: a SEND takes whichever receive is at the
// queue's head, whoever posted it, as on a verbs SRQ. Counts and bytes are
// checked exactly, never timings.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "support/scoped_env.h"
#include "support/thread_ranks.h"
#include "support/flood_exchange.h"
#include "transport/messaging/credit_flow.h"
#include "transport/messaging/eager_budget.h"
#include "transport/messaging/receive_pool.h"

namespace ibdt::messaging::testing {
namespace {

using datatype::Datatype;

// CreditFlow keeps the two identities apart: the buffer goes back as the
// work request id that named it, the credit is owed to the sender.
class RecordingHost : public CreditFlow::Host {
 public:
  Status repostBuffer(int sender, uint64_t buffer) override {
    reposted.push_back({sender, buffer});
    return Status::ok();
  }
  bool peerFailed(int rank) const override { return rank == failedRank; }
  void failPeer(int, Status) override {}
  bool mayWithhold(int) const override { return false; }

  std::vector<std::pair<int, uint64_t>> reposted;
  int failedRank = -1;
};

TEST(SharedReceives, PoolBuffersGoBackByIdWhileCreditsAreTheSenders) {
  Counters counters;
  CreditFlow credits(counters);
  credits.init(4, 0, 8);
  for (int rank = 0; rank < 4; ++rank) credits.reset(rank);
  RecordingHost host;
  host.failedRank = 3;
  // Rank 2's messages landed in pool slots 0 and 5 (posted by anyone's
  // repost), rank 1's in slot 2, failed rank 3's in slot 7.
  credits.consumed(host, 2, ReceivePool::workId(0), CreditFlow::Use::kCredit);
  credits.consumed(host, 1, ReceivePool::workId(2), CreditFlow::Use::kCredit);
  credits.consumed(host, 2, ReceivePool::workId(5), CreditFlow::Use::kCredit);
  credits.consumed(host, 3, ReceivePool::workId(7), CreditFlow::Use::kReserve);
  credits.repostConsumed(host, /*dueOnly=*/false);
  ASSERT_EQ(host.reposted.size(), 4u);
  EXPECT_EQ(host.reposted[0], (std::pair<int, uint64_t>{2, ReceivePool::workId(0)}));
  EXPECT_EQ(host.reposted[1], (std::pair<int, uint64_t>{1, ReceivePool::workId(2)}));
  EXPECT_EQ(host.reposted[2], (std::pair<int, uint64_t>{2, ReceivePool::workId(5)}));
  // A failed sender's pool buffer goes back too: it is nobody's.
  EXPECT_EQ(host.reposted[3], (std::pair<int, uint64_t>{3, ReceivePool::workId(7)}));
  EXPECT_EQ(credits.owedTo(2), 2u);
  EXPECT_EQ(credits.owedTo(1), 1u);
  EXPECT_EQ(credits.owedTo(3), 0u);
  EXPECT_TRUE(ReceivePool::names(ReceivePool::workId(5)));
  EXPECT_EQ(ReceivePool::slotOf(ReceivePool::workId(5)), 5u);
}

constexpr int kRanks = 4;
constexpr int kTag = 9;

void floodWithExchanges(bool expectShared) {
  Ranks ranks = createRanks(kRanks, budgetOptions(), /*sharedReceives=*/true);
  floodWithExchanges(ranks, kTag, 30);
  SharedReceiveStats stats = sharedReceiveStats(*ranks.world);
  EXPECT_EQ(stats.queues, expectShared ? uint64_t{kRanks} : 0u);
  EXPECT_EQ(stats.foundEmpty, 0u) << "a SEND met an empty shared receive queue (receiver-not-ready)";
}

TEST(SharedReceives, AFloodThroughThePoolArrivesInOrderAndStarvesNobody) {
  test::ScopedEnv srq("IBDT_MSG_SRQ_RANKS", "0");
  test::ScopedEnv budget("IBDT_MSG_EAGER_MEMORY", "0");  // 32 credits per peer
  floodWithExchanges(/*expectShared=*/true);
}

TEST(SharedReceives, AtTheFloorOfTwoCreditsThePoolStillCarriesEveryProtocol) {
  test::ScopedEnv srq("IBDT_MSG_SRQ_RANKS", "0");
  test::ScopedEnv budget("IBDT_MSG_EAGER_MEMORY", "1");  // below any slot: 2 credits per peer
  floodWithExchanges(/*expectShared=*/true);
}

TEST(SharedReceives, AtOrBelowTheRankThresholdEachPeerKeepsItsOwnBuffers) {
  test::ScopedEnv srq("IBDT_MSG_SRQ_RANKS", std::to_string(kRanks).c_str());
  floodWithExchanges(/*expectShared=*/false);
}

// Ranks 1..3 each send 40 small messages to rank 0 while it stalls, with 5
// credits per peer: they take exactly 5 buffers each from rank 0's pool of
// 4 x (5 + 4) = 36, which goes down to 36 - 15 = 21 and no lower (no chunk
// short, nothing else taken), and never runs empty; then rank 0 takes all
// 120, each sender's in order, every byte checked.
TEST(SharedReceives, StalledReceiverPoolGoesDownByExactlyTheSendersCredits) {
  test::ScopedEnv srq("IBDT_MSG_SRQ_RANKS", "0");
  const Options options = budgetOptions();
  const uint64_t slot = eagerSlotBytes(options.eagerLimit);
  const uint64_t budget = kRanks * (5 + CreditFlow::kReserveSlots) * slot;
  ASSERT_EQ(eagerCreditsWithin(budget, slot, kRanks, options.eagerCredits), 5u);
  test::ScopedEnv memory("IBDT_MSG_EAGER_MEMORY", std::to_string(budget).c_str());
  Ranks ranks = createRanks(kRanks, options, /*sharedReceives=*/true);
  for (auto& context : ranks.contexts) ASSERT_NE(context, nullptr);
  constexpr int kMessages = 40;
  std::vector<std::vector<uint8_t>> sent, got;
  std::vector<Transfer> transfers;
  for (int from = 1; from < kRanks; ++from) {
    for (int i = 0; i < kMessages; ++i) {
      sent.push_back(payload(from, i, 1 + (i * 37) % 200));
      auto request = ranks.contexts[static_cast<size_t>(from)]->isend(sent.back().data(),
                                                                       static_cast<int64_t>(sent.back().size()),
                                                                       Datatype::of<uint8_t>(), 0, kTag);
      ASSERT_TRUE(request.isOk());
      transfers.push_back({ranks.contexts[static_cast<size_t>(from)].get(), std::move(*request)});
    }
  }
  for (int i = 0; i < 200; ++i) {
    for (int rank = 1; rank < kRanks; ++rank) EXPECT_TRUE(ranks.contexts[static_cast<size_t>(rank)]->progress().isOk());
  }
  EXPECT_EQ(sharedReceiveStats(*ranks.world).lowWater, 36u - 3 * 5);
  Context& receiver = *ranks.contexts[0];
  for (size_t k = 0; k < sent.size(); ++k) {
    got.emplace_back(sent[k].size(), 0);
    int from = 1 + static_cast<int>(k) / kMessages;
    auto request = receiver.irecv(got.back().data(), static_cast<int64_t>(got.back().size()),
                                  Datatype::of<uint8_t>(), from, kTag);
    ASSERT_TRUE(request.isOk());
    transfers.push_back({&receiver, std::move(*request)});
  }
  ASSERT_TRUE(progressUntil(ranks, transfers));
  for (size_t k = 0; k < sent.size(); ++k) EXPECT_EQ(got[k], sent[k]) << "message " << k;
  SharedReceiveStats stats = sharedReceiveStats(*ranks.world);
  EXPECT_EQ(stats.lowWater, 36u - 3 * 5) << "the pool went lower than the senders' credits allow";
  EXPECT_EQ(stats.foundEmpty, 0u);
}

TEST(SharedReceives, ABadThresholdIsRefusedNamingTheKnob) {
  test::ScopedEnv srq("IBDT_MSG_SRQ_RANKS", "-1");
  auto world = makeLoopbackWorld(/*sharedReceives=*/true);
  auto domain = openLoopbackDomain(world, loopbackCaps());
  ThreadExchange exchange(1);
  Bootstrap bootstrap{0, 1, [&exchange](std::span<const uint8_t> v) { return exchange.allgather(0, v); }};
  auto context = Context::create(*domain, bootstrap, budgetOptions());
  ASSERT_FALSE(context.isOk());
  EXPECT_NE(context.status().toString().find("IBDT_MSG_SRQ_RANKS"), std::string::npos) << context.status().toString();
}

}  // namespace
}  // namespace ibdt::messaging::testing
