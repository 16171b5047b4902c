// The unexpected-message budget (Options::unexpectedMaxBytes, issue 17): a
// sender flooding a rank that posts no receive for a while must not grow the
// receiver's memory without bound. Over the budget the receiver withholds
// eager credits, so the sender waits; once receives are posted every byte
// arrives, in order, and the bytes held go back to zero.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

#include "support/pattern.h"
#include "support/thread_ranks.h"

namespace ibdt::messaging::testing {
namespace {

using datatype::Datatype;

// Byte `i` of message `message`, from the suites' one formula (support/pattern.h).
uint8_t patternByte(int message, size_t i) { return ibdt::test::patternByte(i, static_cast<uint32_t>(message)); }

struct Flood {
  int messages;
  size_t bytes;
};

void runFlood(const Flood& flood, int64_t budget) {
  Options options;
  options.unexpectedMaxBytes = budget;
  std::atomic<bool> receiverPosting{false};
  runRanks(2, options, [&](RankEnv& env) {
    Datatype type = Datatype::of<uint8_t>();
    auto count = static_cast<int64_t>(flood.bytes);
    if (env.rank == 0) {
      std::vector<uint8_t> data(flood.bytes);
      for (int m = 0; m < flood.messages; ++m) {
        for (size_t i = 0; i < data.size(); ++i) data[i] = patternByte(m, i);
        // Blocking: over the budget this waits for credits the receiver withholds.
        ASSERT_TRUE(env.context.send(data.data(), count, type, 1, 9).isOk()) << m;
      }
      EXPECT_TRUE(receiverPosting.load()) << "every send finished before the receiver posted anything";
      return;
    }
    // Post nothing: progress until the sender is held back, then a while longer.
    auto deadline = soon();
    while (env.context.counters().creditsWithheld == 0 && !deadline.expired()) {
      ASSERT_TRUE(env.context.progress().isOk());
      std::this_thread::yield();
    }
    ASSERT_GT(env.context.counters().creditsWithheld, 0u) << "the budget never held the sender back";
    for (int i = 0; i < 2000; ++i) {
      ASSERT_TRUE(env.context.progress().isOk());
      std::this_thread::yield();
    }
    const Counters& held = env.context.counters();
    // At most one peer's worth of eager buffers beyond the budget.
    uint64_t slack = uint64_t{options.eagerCredits} * (static_cast<uint64_t>(options.pipelineLimit) + 1024);
    EXPECT_LE(held.unexpectedBytesPeak, static_cast<uint64_t>(budget) + slack);
    EXPECT_LT(held.unexpected, static_cast<uint64_t>(flood.messages));  // the rest waits at the sender
    receiverPosting.store(true);
    std::vector<uint8_t> in(flood.bytes + 1);
    for (int m = 0; m < flood.messages; ++m) {
      in.back() = 0x5a;
      RecvInfo info;
      Status status = env.context.recv(in.data(), count, type, 0, 9, 0, &info);
      ASSERT_TRUE(status.isOk()) << m << ": " << status.toString();
      ASSERT_EQ(info.bytes, count);
      size_t wrong = 0;  // one assertion per message, not per byte: 125 MiB under ASan
      while (wrong < flood.bytes && in[wrong] == patternByte(m, wrong)) ++wrong;
      ASSERT_EQ(wrong, flood.bytes) << "message " << m << ": first wrong byte";
      ASSERT_EQ(in.back(), 0x5a);
    }
    const Counters& after = env.context.counters();
    EXPECT_EQ(after.unexpectedBytes, 0u);  // everything held was given back
    EXPECT_LE(after.unexpectedBytesPeak, static_cast<uint64_t>(budget) + slack);
    std::printf("[ flood    ] %d x %zu B, budget %lld B: peak %llu B held, %llu buffers withheld\n", flood.messages,
                flood.bytes, static_cast<long long>(budget), static_cast<unsigned long long>(after.unexpectedBytesPeak),
                static_cast<unsigned long long>(after.creditsWithheld));
  });
}

// Regression: 20 000 x 32 KiB to a rank that posted nothing grew its memory
// by 629 MiB; now it stays near the budget (1 MiB here). 4 000 messages
// (125 MiB, 125 times the budget) show the same and keep the test short
// under the sanitizers.
TEST(UnexpectedBudget, EagerFloodIsHeldToTheBudgetAndDeliveredInOrder) {
  runFlood({4000, 32 * 1024}, int64_t{1} << 20);
}

// Pipelined eager messages (above the eager limit) take the same credits.
TEST(UnexpectedBudget, PipelinedFloodIsHeldToTheBudgetAndDeliveredInOrder) {
  runFlood({200, 256 * 1024}, int64_t{2} << 20);
}

// Over the budget, a receive waiting for a message queued behind the held
// ones gets it: credits flow to a sender a posted receive waits for.
TEST(UnexpectedBudget, AReceiveForAMessageBehindTheFloodIsNotDeadlocked) {
  constexpr int kFlood = 200;
  constexpr size_t kBytes = 32 * 1024;
  Options options;
  options.unexpectedMaxBytes = 256 * 1024;
  runRanks(2, options, [&](RankEnv& env) {
    Datatype type = Datatype::of<uint8_t>();
    std::vector<uint8_t> data(kBytes);
    if (env.rank == 0) {
      std::vector<Request> sends;
      std::vector<std::vector<uint8_t>> buffers(kFlood, std::vector<uint8_t>(kBytes));
      for (int m = 0; m < kFlood; ++m) {
        for (size_t i = 0; i < kBytes; ++i) buffers[m][i] = patternByte(m, i);
        auto send = env.context.isend(buffers[m].data(), static_cast<int64_t>(kBytes), type, 1, 9);
        ASSERT_TRUE(send.isOk());
        sends.push_back(std::move(*send));
      }
      int32_t last = 4242;
      ASSERT_TRUE(env.context.send(&last, 1, Datatype::of<int32_t>(), 1, 10).isOk());
      for (Request& send : sends) ASSERT_TRUE(env.context.wait(send, nullptr, soon()).isOk());
      return;
    }
    auto deadline = soon();
    while (env.context.counters().creditsWithheld == 0 && !deadline.expired()) {
      ASSERT_TRUE(env.context.progress().isOk());
      std::this_thread::yield();
    }
    ASSERT_GT(env.context.counters().creditsWithheld, 0u);
    int32_t last = 0;
    Status status = env.context.recv(&last, 1, Datatype::of<int32_t>(), 0, 10);
    ASSERT_TRUE(status.isOk()) << status.toString();
    EXPECT_EQ(last, 4242);
    for (int m = 0; m < kFlood; ++m) {
      ASSERT_TRUE(env.context.recv(data.data(), static_cast<int64_t>(kBytes), type, 0, 9).isOk()) << m;
      for (size_t i = 0; i < kBytes; ++i) ASSERT_EQ(data[i], patternByte(m, i)) << "message " << m << " byte " << i;
    }
    EXPECT_EQ(env.context.counters().unexpectedBytes, 0u);
  });
}

TEST(UnexpectedBudget, BadKnobValueIsAnError) {
  setenv("IBDT_MSG_UNEXPECTED_MAX_BYTES", "lots", 1);
  auto options = optionsFromEnvironment();
  unsetenv("IBDT_MSG_UNEXPECTED_MAX_BYTES");
  ASSERT_EQ(options.status().code(), Code::kInvalidArgument);
  EXPECT_NE(options.status().toString().find("IBDT_MSG_UNEXPECTED_MAX_BYTES='lots'"), std::string::npos)
      << options.status().toString();
}

}  // namespace
}  // namespace ibdt::messaging::testing
