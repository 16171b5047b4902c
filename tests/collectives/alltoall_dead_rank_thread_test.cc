// A rank dies between two runs of a persistent all-to-all: every survivor's
// run ends with an error, never a hang and never the deadline, for every
// algorithm (issue 12). Ranks are threads over the loopback fabric; the dead
// rank crashes (its loopback domain killed, its Context gone) after a first
// run whose every byte was checked. The Bruck family forwards blocks through other
// ranks, so most survivors never talk to the dead rank: they fail through
// the poison their upstream peers send (docs/alltoall-bruck.md); the
// hierarchical algorithm loses a node member or a leader; the shared-memory
// algorithm's survivors wait for a flag the dead rank never raises and learn
// of its death from the messaging layer (Context::peerStatus). The small
// collectives and the barrier likewise (DeadRankSmallCollective).
#include <gtest/gtest.h>

#include <barrier>
#include <string>
#include <thread>
#include <vector>

#include "collectives/alltoall_data.h"
#include "ibdt/collectives.h"
#include "support/thread_ranks.h"

namespace ibdt::collectives {
namespace {

using datatype::Datatype;
using testing::AlltoallBuffers;
using testing::Side;

struct DeadRankCase {
  std::string algorithm;  // as IBDT_ALLTOALL_ALGORITHM names it
  int ranks;
  int nodes;  // > 1: a node map of that many blocks (hierarchical)
  LeaderExchange leaderExchange = LeaderExchange::kAuto;
  int64_t bytes;
  bool inPlace;
  bool killLeader;  // the first rank of the last node, else the last rank
};

std::string caseName(const ::testing::TestParamInfo<DeadRankCase>& info) {
  const DeadRankCase& c = info.param;
  std::string name = c.algorithm + "_p" + std::to_string(c.ranks);
  if (c.nodes > 1) name += "_" + std::to_string(c.nodes) + "nodes_" + std::string(leaderExchangeName(c.leaderExchange));
  name += "_" + std::to_string(c.bytes) + "B" + (c.inPlace ? "_inplace" : "") + (c.killLeader ? "_leader" : "_last");
  for (char& ch : name) ch = (ch == '-') ? '_' : ch;
  return name;
}

// `nodes` blocks of consecutive ranks, the lower nodes taking the extra ones.
std::vector<NodeInfo> blockNodeMap(int size, int nodes) {
  std::vector<NodeInfo> map;
  const int base = size / nodes, extra = size % nodes;
  for (int node = 0, rank = 0; node < nodes; ++node) {
    const int members = base + (node < extra ? 1 : 0);
    for (int local = 0; local < members; ++local, ++rank) map.push_back({node, local});
  }
  return map;
}

int deadRank(const DeadRankCase& c) {
  if (!c.killLeader || c.nodes <= 1) return c.ranks - 1;
  const auto map = blockNodeMap(c.ranks, c.nodes);
  for (int r = 0; r < c.ranks; ++r) {
    if (map[static_cast<size_t>(r)].nodeId == c.nodes - 1) return r;
  }
  return c.ranks - 1;
}

AlltoallOptions optionsOf(const DeadRankCase& c) {
  AlltoallOptions options;
  auto algorithm = parseAlltoallAlgorithm(c.algorithm);
  EXPECT_TRUE(algorithm.isOk()) << c.algorithm;
  if (algorithm.isOk()) options.algorithm = *algorithm;
  options.radix = 3;
  options.leaderExchange = c.leaderExchange;
  return options;
}

// Crashes `rank` after the ranks' last barrier together: not an orderly
// close, so its peers' links fail (as a dead process's shm liveness or a
// verbs QP error report it); it leaves the barrier for good.
void crash(messaging::testing::Ranks& ranks, int rank, Result<std::unique_ptr<Communicator>>& comm,
           std::barrier<>& meet) {
  if (comm.isOk()) comm->reset();
  messaging::testing::killLoopbackDomain(*ranks.domains[static_cast<size_t>(rank)]);
  ranks.contexts[static_cast<size_t>(rank)].reset();
  meet.arrive_and_drop();
}

// How a survivor waits for its run: Plan::wait, or a loop of Plan::test
// as a program overlapping the run with its own work polls it (each test
// must notice the death too, not only a blocking wait).
enum class Waiting { kWait, kTestLoop };

Status survivorRun(Plan& plan, Waiting waiting) {
  IBDT_RETURN_IF_ERROR(plan.start());
  const Deadline deadline = Deadline::after(std::chrono::seconds(60));
  if (waiting == Waiting::kWait) return plan.wait(deadline);
  for (;;) {
    IBDT_ASSIGN_OR_RETURN(bool done, plan.test());
    if (done) return plan.wait();
    if (deadline.expired()) return makeError(Code::kTimeout, "the test loop reached its deadline");
    std::this_thread::yield();
  }
}

class DeadRankAlltoall : public ::testing::TestWithParam<DeadRankCase> {
 protected:
  void run(Waiting waiting);
};

TEST_P(DeadRankAlltoall, EverySurvivorFailsWithoutWaitingForTheDeadline) { run(Waiting::kWait); }

TEST_P(DeadRankAlltoall, EverySurvivorPollingByTestFailsToo) { run(Waiting::kTestLoop); }

void DeadRankAlltoall::run(Waiting waiting) {
  const DeadRankCase& c = GetParam();
  const int dead = deadRank(c);
  messaging::testing::Ranks ranks = messaging::testing::createRanks(c.ranks, {});
  for (auto& context : ranks.contexts) ASSERT_NE(context, nullptr);
  std::barrier meet(c.ranks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < c.ranks; ++rank) {
    threads.emplace_back([&, rank] {
      messaging::Context& context = *ranks.contexts[static_cast<size_t>(rank)];
      auto comm = c.nodes > 1 ? Communicator::create(context, blockNodeMap(c.ranks, c.nodes))
                              : Communicator::create(context);
      // No early return before the barriers: the other ranks wait there.
      EXPECT_TRUE(comm.isOk()) << comm.status().toString();
      const Side side = testing::byteSide(c.bytes);
      AlltoallBuffers buffers(side, side, c.ranks, rank);
      Result<Plan> plan = makeError(Code::kState, "no communicator");
      if (comm.isOk()) {
        plan = c.inPlace ? alltoallInit(**comm, kInPlace, 0, Datatype(), buffers.recvbuf(), side.count, side.type,
                                        optionsOf(c))
                         : alltoallInit(**comm, buffers.sendbuf(), side.count, side.type, buffers.recvbuf(),
                                        side.count, side.type, optionsOf(c));
      }
      EXPECT_TRUE(plan.isOk()) << "rank " << rank << ": " << plan.status().toString();
      if (plan.isOk()) {
        EXPECT_EQ(plan->algorithm(), c.algorithm == "bruck-radix" ? "bruck-radix-3" : c.algorithm);
        const std::string wrong = c.inPlace ? testing::runInPlaceChecked(*plan, buffers, 0, messaging::testing::soon())
                                            : testing::runChecked(*plan, buffers, 0, messaging::testing::soon());
        EXPECT_EQ(wrong, "") << "rank " << rank << ", the healthy run";
      }
      meet.arrive_and_wait();  // every healthy run is over
      if (rank == dead) {
        plan = makeError(Code::kState, "dead");
        crash(ranks, rank, comm, meet);
        return;
      }
      meet.arrive_and_wait();  // the dead rank is gone
      if (!plan.isOk()) return;
      if (c.inPlace) buffers.loadInPlace();
      const Status status = survivorRun(*plan, waiting);
      EXPECT_FALSE(status.isOk()) << "rank " << rank << " finished a run without rank " << dead;
      EXPECT_NE(status.code(), Code::kTimeout) << "rank " << rank << ": " << status.toString();
    });
  }
  for (auto& thread : threads) thread.join();
}

// The small collectives (the algorithms' own agreements) and the barrier
// after a rank died, 8 ranks: Bruck's allgather and the binomial broadcast
// reach most survivors only through other survivors, which stop at the
// failure and send nothing more. Every survivor still ends with an error
// (Plan::wait looks at every rank of the communicator once its wait for a
// peer has lasted a while), never the deadline.
enum class SmallCollective { kAllgather, kAllreduce, kBroadcastFromRank0, kBroadcastFromRank5, kBarrier };

class DeadRankSmallCollective : public ::testing::TestWithParam<SmallCollective> {};

TEST_P(DeadRankSmallCollective, EverySurvivorFailsWithoutWaitingForTheDeadline) {
  constexpr int kRanks = 8, kDead = 3;
  messaging::testing::Ranks ranks = messaging::testing::createRanks(kRanks, {});
  for (auto& context : ranks.contexts) ASSERT_NE(context, nullptr);
  std::barrier meet(kRanks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      auto comm = Communicator::create(*ranks.contexts[static_cast<size_t>(rank)]);
      EXPECT_TRUE(comm.isOk()) << comm.status().toString();  // no early return before the barrier
      int64_t mine[2] = {rank, 100 + rank}, all[2 * kRanks] = {};
      if (comm.isOk()) {  // a healthy round first: every value checked
        EXPECT_TRUE(allgather(**comm, mine, 2, all, messaging::testing::soon()).isOk());
        for (int r = 0; r < kRanks; ++r) EXPECT_EQ(all[2 * r + 1], 100 + r) << "rank " << rank;
      }
      meet.arrive_and_wait();
      if (rank == kDead) {
        crash(ranks, rank, comm, meet);
        return;
      }
      meet.arrive_and_wait();  // the dead rank is gone
      if (!comm.isOk()) return;
      const Deadline deadline = Deadline::after(std::chrono::seconds(60));
      Status status;
      switch (GetParam()) {
        case SmallCollective::kAllgather: status = allgather(**comm, mine, 2, all, deadline); break;
        case SmallCollective::kAllreduce: status = allreduce(**comm, mine, all, 2, ReduceOp::kSum, deadline); break;
        case SmallCollective::kBroadcastFromRank0: status = broadcast(**comm, mine, 2, 0, deadline); break;
        case SmallCollective::kBroadcastFromRank5: status = broadcast(**comm, mine, 2, 5, deadline); break;
        case SmallCollective::kBarrier: status = barrier(**comm, deadline); break;
      }
      // A broadcast's root and the ranks whose subtree lacks the dead rank
      // may finish: they need nothing from it.
      const bool broadcast = GetParam() == SmallCollective::kBroadcastFromRank0 ||
                             GetParam() == SmallCollective::kBroadcastFromRank5;
      if (!broadcast) {
        EXPECT_FALSE(status.isOk()) << "rank " << rank << " finished without rank " << kDead;
      } else if (status.isOk()) {  // it got the root's values
        const int root = GetParam() == SmallCollective::kBroadcastFromRank0 ? 0 : 5;
        EXPECT_EQ(mine[0], root) << "rank " << rank;
        EXPECT_EQ(mine[1], 100 + root) << "rank " << rank;
      }
      EXPECT_NE(status.code(), Code::kTimeout) << "rank " << rank << ": " << status.toString();
    });
  }
  for (auto& thread : threads) thread.join();
}

INSTANTIATE_TEST_SUITE_P(Operations, DeadRankSmallCollective,
                         ::testing::Values(SmallCollective::kAllgather, SmallCollective::kAllreduce,
                                           SmallCollective::kBroadcastFromRank0, SmallCollective::kBroadcastFromRank5,
                                           SmallCollective::kBarrier));

std::vector<DeadRankCase> deadRankCases() {
  std::vector<DeadRankCase> cases;
  const char* const flat[] = {"pairwise",    "bruck-basic",  "bruck-modified", "bruck-zero-copy",
                              "bruck-radix", "direct-write", "shared-memory"};
  for (int p : {5, 8}) {
    for (int64_t bytes : {int64_t{13}, int64_t{80000}}) {  // eager and rendezvous
      for (const char* algorithm : flat) {
        const bool inPlaceAllowed = std::string(algorithm) != "direct-write";
        cases.push_back({algorithm, p, 1, LeaderExchange::kAuto, bytes, false, false});
        if (inPlaceAllowed && bytes == 13) cases.push_back({algorithm, p, 1, LeaderExchange::kAuto, bytes, true, false});
      }
      for (LeaderExchange exchange : {LeaderExchange::kDirect, LeaderExchange::kBruck}) {
        const int nodes = exchange == LeaderExchange::kBruck ? 3 : 2;
        for (bool leader : {false, true}) {
          cases.push_back({"hierarchical", p, nodes, exchange, bytes, false, leader});
        }
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Algorithms, DeadRankAlltoall, ::testing::ValuesIn(deadRankCases()), caseName);

}  // namespace
}  // namespace ibdt::collectives
