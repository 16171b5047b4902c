// The schedules are the plans' own (docs/simulator.md): live plans of every
// all-to-all algorithm with a schedule run over thread ranks with a trace
// sink installed (collectives/plan_trace.h), every byte received checked,
// and each rank's sends and receives per round, peer and bytes, equal
// alltoallSchedule()'s for the same shape: p = 4..8, blocks of 0, 1, 13 and
// 4096 bytes; hierarchical on one node and on nodes of 2 and 3 ranks (a
// partial last node), 1 and 2 leaders, all node pairs at once and one at a
// time, its node-local hops two-sided, and its one-sided form (the relay)
// against the relay's schedule.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "collectives/alltoall_data.h"
#include "collectives/alltoall_schedule.h"
#include "collectives/plan_trace.h"
#include "ibdt/collectives.h"
#include "support/thread_ranks.h"

namespace ibdt::collectives {
namespace {

using messaging::testing::RankEnv;
using messaging::testing::runRanks;
using messaging::testing::soon;

// A rank's non-empty rounds: round -> (sends, receives), each sorted (the
// order within a round is the plan's own business).
using Messages = std::vector<std::pair<int, int64_t>>;  // (peer, bytes)
using Rounds = std::map<int, std::pair<Messages, Messages>>;

Rounds roundsOf(const PlanTrace& trace) {
  Rounds rounds;
  for (const TracedMessage& m : trace) {
    auto& [sends, recvs] = rounds[m.round];
    (m.send ? sends : recvs).emplace_back(m.peer, m.bytes);
  }
  for (auto& [round, messages] : rounds) {
    std::sort(messages.first.begin(), messages.first.end());
    std::sort(messages.second.begin(), messages.second.end());
  }
  return rounds;
}

Rounds roundsOf(const AlltoallSchedule& schedule) {
  PlanTrace trace;
  for (size_t r = 0; r < schedule.rounds.size(); ++r) {
    for (const ScheduledMessage& m : schedule.rounds[r].sends) trace.push_back({int(r), true, m.peer, m.bytes});
    for (const ScheduledMessage& m : schedule.rounds[r].recvs) trace.push_back({int(r), false, m.peer, m.bytes});
  }
  return roundsOf(trace);
}

std::string describe(const Rounds& rounds) {
  std::ostringstream out;
  for (const auto& [round, messages] : rounds) {
    out << "\n  round " << round << ": send";
    for (const auto& [peer, bytes] : messages.first) out << " " << peer << ":" << bytes;
    out << "; receive";
    for (const auto& [peer, bytes] : messages.second) out << " " << peer << ":" << bytes;
  }
  return out.str();
}

struct Case {
  AlltoallOptions options;
  int ranksPerNode = 0;  // hierarchical: the node size of the communicator's map; 0: one node
};

std::vector<Case> cases() {
  std::vector<Case> out;
  auto add = [&](AlltoallAlgorithm algorithm, int64_t radix = 2, int64_t throttle = 8) {
    AlltoallOptions options;
    options.algorithm = algorithm;
    options.radix = radix;
    options.throttle = throttle;
    out.push_back({options});
  };
  add(AlltoallAlgorithm::kPairwise, 2, 0);
  add(AlltoallAlgorithm::kPairwise, 2, 2);
  add(AlltoallAlgorithm::kBruckBasic);
  add(AlltoallAlgorithm::kBruckModified);
  add(AlltoallAlgorithm::kBruckZeroCopy);
  for (int64_t radix : {3, 4, 8}) add(AlltoallAlgorithm::kBruckRadix, radix);
  add(AlltoallAlgorithm::kDirectWrite);
  for (int perNode : {0, 2, 3}) {
    for (int leaders : {1, 2}) {
      for (int64_t throttle : {0, 1}) {
        out.push_back({testing::hierarchical(leaders, LeaderExchange::kDirect, throttle), perNode});
      }
    }
  }
  return out;
}

// Rank r on node r / perNode (the schedule's layout; 0: one node).
std::vector<NodeInfo> nodeMap(int size, int perNode) {
  std::vector<NodeInfo> map;
  for (int r = 0; r < size; ++r) map.push_back(perNode == 0 ? NodeInfo{0, r} : NodeInfo{r / perNode, r % perNode});
  return map;
}

// Builds the plan with a trace sink, runs it twice (checking every byte)
// and compares what each run posted with the schedule.
void traceAndCompare(Communicator& comm, RankEnv& env, const Case& c, int64_t bytes, bool relay = false) {
  const AlltoallOptions& o = c.options;
  ScheduleShape shape{comm.size(), comm.rank(), bytes,
                      o.radix,     o.throttle,  c.ranksPerNode == 0 ? comm.size() : c.ranksPerNode,
                      o.leaders};
  shape.relay = relay && o.algorithm == AlltoallAlgorithm::kHierarchical;
  auto schedule = alltoallSchedule(o.algorithm, shape);
  ASSERT_TRUE(schedule.isOk()) << schedule.status().toString();
  const Rounds expected = roundsOf(*schedule);
  const testing::Side side = testing::byteSide(bytes);
  testing::AlltoallBuffers buffers(side, side, comm.size(), comm.rank());
  PlanTrace trace;
  Result<Plan> plan = [&] {
    ScopedPlanTrace scope(trace);
    return alltoallInit(comm, buffers.sendbuf(), side.count, side.type, buffers.recvbuf(), side.count, side.type, o);
  }();
  ASSERT_TRUE(plan.isOk()) << plan.status().toString();
  ASSERT_EQ(plan->algorithm(), o.algorithm == AlltoallAlgorithm::kBruckRadix
                                   ? "bruck-radix-" + std::to_string(o.radix)
                                   : std::string(alltoallAlgorithmName(o.algorithm)));
  for (int run = 0; run < 2; ++run) {
    trace.clear();  // the init's own collectives (agreements, key exchanges) are not the plan's
    ASSERT_EQ(testing::runChecked(*plan, buffers, run, soon()), "") << "run " << run;
    const Rounds traced = roundsOf(trace);
    EXPECT_EQ(traced, expected) << plan->algorithm() << " p " << comm.size() << " rank " << comm.rank() << " block "
                                << bytes << " radix " << o.radix << " throttle " << o.throttle << " leaders "
                                << o.leaders << " ranks per node " << shape.ranksPerNode << ", run " << run
                                << "\nplan:" << describe(traced) << "\nschedule:" << describe(expected);
    env.barrier();  // nobody refills its buffers while a peer's run still runs
  }
}

class ScheduleTrace : public ::testing::TestWithParam<int> {};

TEST_P(ScheduleTrace, EveryRankPostsItsScheduleRoundByRound) {
  const int p = GetParam();
  runRanks(p, {}, [&](RankEnv& env) {
    uint32_t contextId = kFirstExchangeCommunicator;
    for (int perNode : {0, 2, 3}) {
      auto comm = Communicator::create(env.context, nodeMap(p, perNode), contextId);
      contextId += Communicator::kMaxSplitIds;
      ASSERT_TRUE(comm.isOk()) << comm.status().toString();
      for (const Case& c : cases()) {
        if (c.ranksPerNode != perNode) continue;
        for (int64_t bytes : {0, 1, 13, 4096}) {
          traceAndCompare(**comm, env, c, bytes);
          if (::testing::Test::HasFatalFailure()) return;
        }
      }
    }
  });
}

// The hierarchical alltoall's one-sided form, the relay (every nonempty
// chunk: exchangeZeroCopyMin = 1): its readies, writes and exposures, each
// traced as a message, are the relay's schedule round by round.
TEST_P(ScheduleTrace, HierarchicalRelayPostsItsSchedule) {
  const int p = GetParam();
  messaging::Options oneSided;
  oneSided.exchangeZeroCopyMin = 1;
  runRanks(p, oneSided, [&](RankEnv& env) {
    uint32_t contextId = kFirstExchangeCommunicator;
    for (int perNode : {2, 3}) {
      auto comm = Communicator::create(env.context, nodeMap(p, perNode), contextId);
      contextId += Communicator::kMaxSplitIds;
      ASSERT_TRUE(comm.isOk()) << comm.status().toString();
      for (const Case& c : cases()) {
        if (c.ranksPerNode != perNode) continue;
        for (int64_t bytes : {1, 13, 4096}) {
          traceAndCompare(**comm, env, c, bytes, /*relay=*/true);
          if (::testing::Test::HasFatalFailure()) return;
        }
      }
    }
  });
}

std::string ranksName(const ::testing::TestParamInfo<int>& param) { return "np" + std::to_string(param.param); }

INSTANTIATE_TEST_SUITE_P(Ranks, ScheduleTrace, ::testing::Values(4, 5, 6, 7, 8), ranksName);

// Off by default: a plan built without a sink records nothing, and one
// built with a sink keeps recording there after the scope ends.
TEST(ScheduleTrace, TheSinkIsTakenWhenThePlanIsBuilt) {
  runRanks(2, {}, [&](RankEnv& env) {
    auto comm = Communicator::create(env.context);
    ASSERT_TRUE(comm.isOk());
    const testing::Side side = testing::byteSide(8);
    testing::AlltoallBuffers buffers(side, side, 2, env.rank);
    AlltoallOptions pairwise;
    pairwise.algorithm = AlltoallAlgorithm::kPairwise;
    auto build = [&] {
      return alltoallInit(**comm, buffers.sendbuf(), 8, side.type, buffers.recvbuf(), 8, side.type, pairwise);
    };
    PlanTrace trace;
    auto untraced = build();
    Result<Plan> traced = [&] {
      ScopedPlanTrace scope(trace);
      return build();
    }();
    ASSERT_TRUE(untraced.isOk() && traced.isOk());
    EXPECT_EQ(planTraceOfThisThread(), nullptr);
    ASSERT_EQ(testing::runChecked(*untraced, buffers, 0, soon()), "");
    EXPECT_TRUE(trace.empty());
    env.barrier();
    ASSERT_EQ(testing::runChecked(*traced, buffers, 1, soon()), "");
    const PlanTrace expected = {{0, false, 1 - env.rank, 8}, {0, true, 1 - env.rank, 8}};
    EXPECT_EQ(trace, expected);
    env.barrier();
  });
}

}  // namespace
}  // namespace ibdt::collectives
