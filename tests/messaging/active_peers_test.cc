// ActivePeers: progress() visits only the peers with work (docs/many-ranks.md).
// The counts are of peers handed to progress()'s walk (Counters::peersVisited),
// so they are exact, not timings.
#include "transport/messaging/active_peers.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "support/checked_ping_pong.h"
#include "support/thread_ranks.h"

namespace ibdt::messaging::testing {
namespace {

using datatype::Datatype;

TEST(ActivePeers, AWalkTakesEachMarkedRankOnceAndUnmarksIt) {
  ActivePeers active;
  active.init(8);
  active.mark(5);
  active.mark(2);
  active.mark(5);
  auto walk = active.takeForWalk();
  ASSERT_EQ(std::vector<int>(walk.begin(), walk.end()), (std::vector<int>{5, 2}));
  EXPECT_EQ(active.visits(), 2u);
  // Marked during the walk: taken by the next one, not lost.
  active.mark(2);
  EXPECT_EQ(std::vector<int>(walk.begin(), walk.end()), (std::vector<int>{5, 2}));
  auto next = active.takeForWalk();
  ASSERT_EQ(std::vector<int>(next.begin(), next.end()), (std::vector<int>{2}));
  EXPECT_TRUE(active.takeForWalk().empty());
  EXPECT_EQ(active.visits(), 3u);
}

// 16 ranks connect eagerly and each sends one message to every other (every
// peer connected, a buffer of each reposted). Then rank 0's progress visits
// no idle peer, and a ping-pong with rank 1 visits only rank 1, a few times
// per round trip, whatever the 14 others.
TEST(ActivePeers, ProgressDoesNotVisitIdleConnectedPeers) {
  constexpr int kRanks = 16;
  constexpr int kRoundTrips = 50;
  Options options = smallOptions();
  options.connect = Connect::kEager;
  runRanks(kRanks, options, [](RankEnv& env) {
    Datatype type = Datatype::of<int64_t>();
    std::vector<int64_t> got(kRanks, -1);
    std::vector<int64_t> sent(kRanks);
    std::vector<Request> requests;
    for (int peer = 0; peer < kRanks; ++peer) {
      if (peer == env.rank) continue;
      sent[static_cast<size_t>(peer)] = env.rank * 1000 + peer;
      auto recv = env.context.irecv(&got[static_cast<size_t>(peer)], 1, type, peer, 3);
      auto send = env.context.isend(&sent[static_cast<size_t>(peer)], 1, type, peer, 3);
      ASSERT_TRUE(recv.isOk() && send.isOk());
      requests.push_back(std::move(recv).value());
      requests.push_back(std::move(send).value());
    }
    ASSERT_TRUE(env.context.waitAll(requests).isOk());
    for (int peer = 0; peer < kRanks; ++peer) {
      if (peer == env.rank) continue;
      ASSERT_EQ(got[static_cast<size_t>(peer)], peer * 1000 + env.rank);
    }
    env.barrier();  // nobody sends again until the ping-pong
    if (env.rank == 0) {
      // The buffers reposted by the first progress mark their peers once.
      for (int i = 0; i < 3; ++i) ASSERT_TRUE(env.context.progress().isOk());
      uint64_t before = env.context.counters().peersVisited;
      for (int i = 0; i < 1000; ++i) ASSERT_TRUE(env.context.progress().isOk());
      EXPECT_EQ(env.context.counters().peersVisited, before) << "an idle progress visited peers";
    }
    env.barrier();
    if (env.rank > 1) return;
    uint64_t before = env.context.counters().peersVisited;
    ASSERT_NO_FATAL_FAILURE(checkedPingPong(env, kRoundTrips, 4));
    // Each round trip marks the partner when sending and when reposting the
    // buffer its message used; a walk of all peers would be 16 per progress.
    uint64_t visited = env.context.counters().peersVisited - before;
    EXPECT_GE(visited, uint64_t{kRoundTrips}) << "the partner was never visited";
    EXPECT_LE(visited, uint64_t{3} * kRoundTrips);
  });
}

}  // namespace
}  // namespace ibdt::messaging::testing
