// IBDT_MSG_EAGER_MEMORY: a rank's eager receive buffers are bounded by a
// total, divided over the job's ranks (transport/messaging/eager_budget.h,
// docs/many-ranks.md). Counts are exact (messages that got through while the
// receiver was not returning credits), never timings.
#include "transport/messaging/eager_budget.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "support/scoped_env.h"
#include "support/thread_ranks.h"
#include "transport/messaging/credit_flow.h"
#include "transport/messaging/wire.h"

namespace ibdt::messaging::testing {
namespace {

using datatype::Datatype;

constexpr uint64_t kReserve = CreditFlow::kReserveSlots;

TEST(EagerBudget, CreditsPerPeerFollowTheBudget) {
  const uint64_t slot = 32768 + 40;  // the default eager limit plus header and envelope
  const uint64_t budget = 16u << 20;
  EXPECT_EQ(eagerCreditsWithin(budget, slot, 2, 32), 32u);  // a small job keeps IBDT_MSG_CREDITS
  EXPECT_EQ(eagerCreditsWithin(budget, slot, 16, 32), budget / slot / 16 - kReserve);
  EXPECT_EQ(eagerCreditsWithin(budget, slot, 64, 32), budget / slot / 64 - kReserve);
  EXPECT_EQ(eagerCreditsWithin(budget, slot, 128, 32), kMinEagerCredits);  // the floor, not the budget
  EXPECT_EQ(eagerCreditsWithin(0, slot, 128, 32), 32u);                    // 0: no bound
  EXPECT_EQ(eagerCreditsWithin(uint64_t{1} << 40, slot, 128, 4096), 4096u);
  // Exactly enough for 10 credits and the reserve at each of 4 endpoints.
  EXPECT_EQ(eagerCreditsWithin(4 * (10 + kReserve) * 1000, 1000, 4, 32), 10u);
  EXPECT_EQ(eagerCreditsWithin(4 * (10 + kReserve) * 1000 - 1, 1000, 4, 32), 9u);
}

TEST(EagerBudget, BuffersStayWithinTheBudgetAboveTheFloor) {
  const uint64_t slot = 32768 + 40, budget = 16u << 20;
  for (int ranks = 1; ranks <= 512; ++ranks) {
    uint64_t credits = eagerCreditsWithin(budget, slot, ranks, 32);
    ASSERT_GE(credits, kMinEagerCredits);
    ASSERT_LE(credits, 32u);
    if (credits > kMinEagerCredits) {
      EXPECT_LE(static_cast<uint64_t>(ranks) * (credits + kReserve) * slot, budget) << ranks << " ranks";
    }
  }
}

TEST(EagerBudget, TheEagerLimitIsHalvedOnlyWhereTheFloorWouldExceedTheBudget) {
  const uint64_t budget = 16u << 20;
  for (int ranks : {2, 16, 64, 85}) {  // the floor of credits at 32 KiB fits: limit kept
    EagerShape shape = eagerShapeWithin(budget, 32768, ranks, 32);
    EXPECT_EQ(shape.eagerLimit, 32768) << ranks << " ranks";
    EXPECT_EQ(shape.credits, eagerCreditsWithin(budget, eagerSlotBytes(32768), ranks, 32)) << ranks << " ranks";
  }
  EagerShape at128 = eagerShapeWithin(budget, 32768, 128, 32);
  EXPECT_EQ(at128.eagerLimit, 16384);
  EXPECT_EQ(at128.credits, budget / eagerSlotBytes(16384) / 128 - kReserve);  // 3
  EXPECT_EQ(eagerShapeWithin(budget, 32768, 512, 32).eagerLimit, 4096);      // 6 x 4 KiB x 512: 12 MiB
  EXPECT_EQ(eagerShapeWithin(budget, 32768, 4096, 32).eagerLimit, kMinBudgetEagerLimit);  // no lower
  EXPECT_EQ(eagerShapeWithin(0, 32768, 4096, 32).eagerLimit, 32768);                      // 0: no bound
  EXPECT_EQ(eagerShapeWithin(1, 256, 8, 32).eagerLimit, 256);  // a limit set below the minimum is kept
  for (int ranks = 1; ranks <= 1024; ++ranks) {
    EagerShape shape = eagerShapeWithin(budget, 32768, ranks, 32);
    uint64_t bytes = static_cast<uint64_t>(ranks) * (shape.credits + kReserve) * eagerSlotBytes(shape.eagerLimit);
    if (bytes > budget) {  // only where nothing lower is allowed
      EXPECT_EQ(shape.eagerLimit, kMinBudgetEagerLimit) << ranks << " ranks";
      EXPECT_EQ(shape.credits, kMinEagerCredits) << ranks << " ranks";
    }
  }
}

TEST(EagerBudget, BadValuesAreRefused) {
  {
    test::ScopedEnv env("IBDT_MSG_EAGER_MEMORY", "lots");
    auto budget = eagerBudgetFromEnvironment();
    ASSERT_FALSE(budget.isOk());
    EXPECT_EQ(budget.status().code(), Code::kInvalidArgument);
    EXPECT_NE(budget.status().toString().find("IBDT_MSG_EAGER_MEMORY"), std::string::npos);
    // Context::create reports it and creates nothing.
    auto world = makeLoopbackWorld();
    auto domain = openLoopbackDomain(world, loopbackCaps());
    ThreadExchange exchange(1);
    Bootstrap bootstrap{0, 1, [&exchange](std::span<const uint8_t> value) { return exchange.allgather(0, value); }};
    auto context = Context::create(*domain, bootstrap, Options{});
    ASSERT_FALSE(context.isOk());
    EXPECT_NE(context.status().toString().find("IBDT_MSG_EAGER_MEMORY"), std::string::npos);
  }
  test::ScopedEnv env("IBDT_MSG_EAGER_MEMORY", "2T");
  EXPECT_EQ(eagerBudgetFromEnvironment().status().code(), Code::kInvalidArgument);
}

constexpr int kRanks = 3;
constexpr int kTag = 3;

uint64_t slotBytes(const Options& options) {
  return sizeof(wire::Header) + sizeof(wire::Envelope) + static_cast<uint64_t>(options.eagerLimit);
}

std::vector<uint8_t> payload(int i, int64_t bytes) {
  std::vector<uint8_t> data(static_cast<size_t>(bytes));
  for (size_t k = 0; k < data.size(); ++k) data[k] = static_cast<uint8_t>(i * 31 + k * 7 + (k >> 8));
  return data;
}

size_t finished(Result<bool> done) {
  EXPECT_TRUE(done.isOk()) << done.status().toString();
  return done.isOk() && *done ? 1 : 0;
}

// Rank 0 sends `sizes` to rank 1 while rank 1 does not progress, then rank 1
// progresses alone; returns how many messages reached it (its credits for
// rank 0 if there are more messages than credits). Then rank 1 receives
// them all, in order, every byte checked.
uint64_t arrivedWhileStalled(const std::vector<int64_t>& sizes, const Options& options = budgetOptions(),
                             std::vector<Scheme>* schemes = nullptr) {
  Ranks ranks = createRanks(kRanks, options);
  Context& sender = *ranks.contexts[0];
  Context& receiver = *ranks.contexts[1];
  std::vector<std::vector<uint8_t>> sent;
  std::vector<Request> sends;
  for (size_t i = 0; i < sizes.size(); ++i) {
    sent.push_back(payload(static_cast<int>(i), sizes[i]));
    auto request = sender.isend(sent.back().data(), sizes[i], Datatype::of<uint8_t>(), 1, kTag);
    EXPECT_TRUE(request.isOk()) << request.status().toString();
    if (request.isOk()) sends.push_back(std::move(*request));
  }
  for (int i = 0; i < 200; ++i) EXPECT_TRUE(sender.progress().isOk());
  for (int i = 0; i < 200; ++i) EXPECT_TRUE(receiver.progress().isOk());
  uint64_t arrived = receiver.counters().unexpected;
  std::vector<std::vector<uint8_t>> got;
  std::vector<Request> recvs;
  for (int64_t bytes : sizes) {
    got.emplace_back(static_cast<size_t>(bytes), 0);
    auto request = receiver.irecv(got.back().data(), bytes, Datatype::of<uint8_t>(), 0, kTag);
    EXPECT_TRUE(request.isOk()) << request.status().toString();
    if (request.isOk()) recvs.push_back(std::move(*request));
  }
  auto deadline = soon();
  for (size_t done = 0; done < sends.size() + recvs.size() && !deadline.expired();) {
    EXPECT_TRUE(sender.progress().isOk());
    EXPECT_TRUE(receiver.progress().isOk());
    done = 0;
    for (auto& request : sends) done += finished(sender.test(request));
    for (auto& request : recvs) done += finished(receiver.test(request));
  }
  for (size_t i = 0; i < sizes.size(); ++i) EXPECT_EQ(got[i], sent[i]) << "message " << i;
  for (size_t i = 0; schemes != nullptr && i < recvs.size(); ++i) {
    RecvInfo info;
    EXPECT_TRUE(receiver.wait(recvs[i], &info).isOk());
    schemes->push_back(info.scheme);
  }
  return arrived;
}

TEST(EagerBudget, AStalledReceiverTakesExactlyItsBudgetedCredits) {
  const Options options = budgetOptions();
  const uint64_t budget = kRanks * (5 + kReserve) * slotBytes(options);  // 5 credits per peer
  ASSERT_EQ(eagerCreditsWithin(budget, slotBytes(options), kRanks, options.eagerCredits), 5u);
  test::ScopedEnv env("IBDT_MSG_EAGER_MEMORY", std::to_string(budget).c_str());
  EXPECT_EQ(arrivedWhileStalled(std::vector<int64_t>(40, 100)), 5u);
}

TEST(EagerBudget, WithoutABoundAPeerGetsAllItsCredits) {
  test::ScopedEnv env("IBDT_MSG_EAGER_MEMORY", "0");
  EXPECT_EQ(arrivedWhileStalled(std::vector<int64_t>(40, 100)), 32u);
}

TEST(EagerBudget, PipelinedEagerCompletesAtTheFloorOfTwoCredits) {
  test::ScopedEnv env("IBDT_MSG_EAGER_MEMORY", "1");  // below any slot: the floor
  // Eager, pipelined (many fragments of at most the eager limit) and rendezvous sizes.
  std::vector<int64_t> sizes{100, 3000, 20000, 1, 256, 257, 50000, 300000, 7};
  EXPECT_EQ(arrivedWhileStalled(sizes), kMinEagerCredits);
}

// A budget that fits the floor of credits at 16 KiB but not at 32 KiB: a
// 20000-byte message, eager at the default limit, goes pipelined; a stalled
// receiver still takes only its 2 credits' worth, and everything arrives.
TEST(EagerBudget, ALoweredEagerLimitSendsLargerMessagesPipelined) {
  Options options = budgetOptions();
  options.eagerLimit = 32768;
  const uint64_t budget = kRanks * (kMinEagerCredits + kReserve) * eagerSlotBytes(16384);
  ASSERT_EQ(eagerShapeWithin(budget, options.eagerLimit, kRanks, options.eagerCredits).eagerLimit, 16384);
  test::ScopedEnv env("IBDT_MSG_EAGER_MEMORY", std::to_string(budget).c_str());
  std::vector<Scheme> schemes;
  EXPECT_LE(arrivedWhileStalled({20000, 16384, 100, 20000, 30000}, options, &schemes), kMinEagerCredits);
  EXPECT_EQ(schemes, (std::vector<Scheme>{Scheme::kPipelined, Scheme::kEager, Scheme::kEager, Scheme::kPipelined,
                                          Scheme::kPipelined}));
}

}  // namespace
}  // namespace ibdt::messaging::testing
