// Credit-only messages (CreditFlow::creditMessageDue, docs/design.md,
// messaging): at the eager budget's floor of 2 or 3 credits per peer a
// ping-pong's replies carry every returned credit, so no credit-only message
// goes; a one-way stream, whose receiver sends nothing, still gets its
// credits back and delivers every message in order. The counts are of
// messages (Counters::creditMessages), not timings.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "support/checked_ping_pong.h"
#include "support/thread_ranks.h"

namespace ibdt::messaging::testing {
namespace {

using datatype::Datatype;

class CreditMessages : public ::testing::TestWithParam<uint32_t> {
 protected:
  Options options() const {
    Options options = smallOptions();
    options.eagerCredits = GetParam();
    return options;
  }
};

TEST_P(CreditMessages, APingPongsRepliesCarryTheCredits) {
  constexpr int64_t kRoundTrips = 200;
  runRanks(2, options(), [](RankEnv& env) {
    const uint64_t before = env.context.counters().creditMessages;
    ASSERT_NO_FATAL_FAILURE(checkedPingPong(env, kRoundTrips, 4));
    // Sending each credit at once, as before, was one credit-only message
    // per message received: kRoundTrips on each side.
    EXPECT_LE(env.context.counters().creditMessages - before, uint64_t{kRoundTrips} / 10);
  });
}

TEST_P(CreditMessages, AOneWayStreamGetsItsCreditsBack) {
  constexpr int64_t kMessages = 300;
  runRanks(2, options(), [](RankEnv& env) {
    Datatype type = Datatype::of<int64_t>();
    const uint64_t before = env.context.counters().creditMessages;
    if (env.rank == 0) {
      std::vector<int64_t> values(kMessages);
      std::vector<Request> sends;
      for (int64_t i = 0; i < kMessages; ++i) {
        values[static_cast<size_t>(i)] = i * 13 + 5;
        auto send = env.context.isend(&values[static_cast<size_t>(i)], 1, type, 1, 9);
        ASSERT_TRUE(send.isOk());
        sends.push_back(std::move(send).value());
      }
      ASSERT_TRUE(env.context.waitAll(sends).isOk());
    } else {
      for (int64_t i = 0; i < kMessages; ++i) {
        int64_t got = -1;
        ASSERT_TRUE(env.context.recv(&got, 1, type, 0, 9).isOk());
        ASSERT_EQ(got, i * 13 + 5) << "message " << i;
      }
      // Nothing went back but credits: kMessages / credits at the least.
      EXPECT_GE(env.context.counters().creditMessages - before, uint64_t{kMessages} / GetParam());
    }
    env.barrier();
  });
}

std::string creditsName(const ::testing::TestParamInfo<uint32_t>& param) {
  return std::to_string(param.param) + "Credits";
}

INSTANTIATE_TEST_SUITE_P(Credits, CreditMessages, ::testing::Values(2u, 3u, 4u), creditsName);

}  // namespace
}  // namespace ibdt::messaging::testing
