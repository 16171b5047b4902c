// Connections on demand and close(), ranks as threads over the loopback
// fabric: only ranks that talk get endpoints, crossed requests make one
// pair, messages queued during set-up leave in order, ANY_SOURCE accepts a
// not-yet-connected peer, dead or silent peers fail only their own
// operations, and close() completes sends in flight with no barrier after.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "support/thread_ranks.h"

namespace ibdt::messaging::testing {
namespace {

using datatype::Datatype;
using namespace std::chrono_literals;

Options lazy(Connect connect = Connect::kLazy) {
  Options options;
  options.connect = connect;
  options.eagerLimit = 256;
  options.eagerCredits = 4;  // queued messages outnumber the credits
  options.segmentSize = 1000;
  return options;
}

// Message `index` from `from`: `count` ints, each naming all three.
std::vector<int32_t> payload(int from, int index, int64_t count) {
  std::vector<int32_t> data(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) data[static_cast<size_t>(i)] = from * 1'000'000 + index * 1000 + static_cast<int32_t>(i % 1000);
  return data;
}

// Eager and rendezvous sizes in turn.
int64_t countOf(int index) { return index % 5 == 4 ? 3000 : 1 + index % 60; }

TEST(LazyConnect, OnlyRanksThatTalkAreConnected) {
  runRanks(8, lazy(), [](RankEnv& env) {
    Datatype type = Datatype::of<int32_t>();
    const int partner = env.rank == 0 ? 3 : env.rank == 3 ? 0 : -1;
    if (partner >= 0) {
      for (int i = 0; i < 10; ++i) {
        auto out = payload(env.rank, i, countOf(i));
        std::vector<int32_t> in(out.size(), -1);
        auto recv = env.context.irecv(in.data(), static_cast<int64_t>(in.size()), type, partner, i);
        ASSERT_TRUE(recv.isOk());
        ASSERT_TRUE(env.context.send(out.data(), static_cast<int64_t>(out.size()), type, partner, i).isOk());
        ASSERT_TRUE(env.context.wait(*recv, nullptr, Deadline::after(60s)).isOk());
        ASSERT_EQ(in, payload(partner, i, countOf(i))) << "message " << i;
      }
    }
    ASSERT_TRUE(env.context.close(Deadline::after(60s)).isOk());
    EXPECT_EQ(env.context.counters().connections, partner >= 0 ? 1u : 0u) << "rank " << env.rank;
  }, loopbackCaps(), /*drain=*/false);
}

TEST(LazyConnect, CrossedRequestsMakeOnePairPerPeer) {
  for (int size : {2, 5, 8}) {
    runRanks(size, lazy(), [size](RankEnv& env) {
      Datatype type = Datatype::of<int32_t>();
      std::vector<std::vector<int32_t>> out(static_cast<size_t>(size)), in(static_cast<size_t>(size));
      std::vector<Request> sends, recvs;
      env.barrier();  // everyone starts connecting at once
      for (int peer = 0; peer < size; ++peer) {
        if (peer == env.rank) continue;
        out[static_cast<size_t>(peer)] = payload(env.rank, peer, countOf(peer + env.rank));
        auto send = env.context.isend(out[static_cast<size_t>(peer)].data(),
                                      static_cast<int64_t>(out[static_cast<size_t>(peer)].size()), type, peer, 1);
        ASSERT_TRUE(send.isOk()) << send.status().toString();
        sends.push_back(std::move(*send));
      }
      for (int peer = 0; peer < size; ++peer) {
        if (peer == env.rank) continue;
        in[static_cast<size_t>(peer)].assign(static_cast<size_t>(countOf(peer + env.rank)), -1);
        auto recv = env.context.irecv(in[static_cast<size_t>(peer)].data(),
                                      static_cast<int64_t>(in[static_cast<size_t>(peer)].size()), type, peer, 1);
        ASSERT_TRUE(recv.isOk());
        recvs.push_back(std::move(*recv));
      }
      ASSERT_TRUE(env.context.waitAll(recvs, Deadline::after(60s)).isOk());
      ASSERT_TRUE(env.context.waitAll(sends, Deadline::after(60s)).isOk());
      for (int peer = 0; peer < size; ++peer) {
        if (peer == env.rank) continue;
        ASSERT_EQ(in[static_cast<size_t>(peer)], payload(peer, env.rank, countOf(peer + env.rank))) << "from " << peer;
      }
      EXPECT_EQ(env.context.counters().connections, static_cast<uint64_t>(size - 1));
      ASSERT_TRUE(env.context.close(Deadline::after(60s)).isOk());
    }, loopbackCaps(), /*drain=*/false);
  }
}

TEST(LazyConnect, MessagesQueuedDuringSetUpLeaveInOrder) {
  constexpr int kMessages = 60;
  runRanks(2, lazy(), [](RankEnv& env) {
    Datatype type = Datatype::of<int32_t>();
    if (env.rank == 0) {
      std::vector<std::vector<int32_t>> out;
      std::vector<Request> sends;
      for (int i = 0; i < kMessages; ++i) out.push_back(payload(0, i, countOf(i)));
      for (int i = 0; i < kMessages; ++i) {  // all queued before rank 1 even answers
        auto send = env.context.isend(out[static_cast<size_t>(i)].data(),
                                      static_cast<int64_t>(out[static_cast<size_t>(i)].size()), type, 1, 7);
        ASSERT_TRUE(send.isOk());
        sends.push_back(std::move(*send));
      }
      env.barrier();
      ASSERT_TRUE(env.context.waitAll(sends, Deadline::after(60s)).isOk());
    } else {
      env.barrier();
      for (int i = 0; i < kMessages; ++i) {
        std::vector<int32_t> in(static_cast<size_t>(countOf(i)), -1);
        RecvInfo info;
        ASSERT_TRUE(env.context.recv(in.data(), static_cast<int64_t>(in.size()), type, 0, 7, 0, &info).isOk());
        ASSERT_EQ(in, payload(0, i, countOf(i))) << "message " << i << " out of order or damaged";
      }
    }
    ASSERT_TRUE(env.context.close(Deadline::after(60s)).isOk());
  }, loopbackCaps(), /*drain=*/false);
}

TEST(LazyConnect, AnySourceAcceptsPeersNotYetConnected) {
  constexpr int kRanks = 6;
  runRanks(kRanks, lazy(), [](RankEnv& env) {
    Datatype type = Datatype::of<int32_t>();
    if (env.rank == 0) {
      std::vector<std::vector<int32_t>> in(kRanks - 1, std::vector<int32_t>(3000, -1));
      std::vector<Request> recvs;
      for (auto& buffer : in) {
        auto recv = env.context.irecv(buffer.data(), 3000, type, kAnySource, kAnyTag);
        ASSERT_TRUE(recv.isOk());
        recvs.push_back(std::move(*recv));
      }
      EXPECT_EQ(env.context.counters().connections, 0u);
      env.barrier();
      std::set<int> sources;
      for (size_t i = 0; i < recvs.size(); ++i) {
        RecvInfo info;
        ASSERT_TRUE(env.context.wait(recvs[i], &info, Deadline::after(60s)).isOk());
        int64_t count = info.bytes / 4;
        std::vector<int32_t> got(in[i].begin(), in[i].begin() + count);
        EXPECT_EQ(got, payload(info.source, info.tag, count)) << "from rank " << info.source;
        EXPECT_TRUE(sources.insert(info.source).second);
      }
      EXPECT_EQ(sources.size(), static_cast<size_t>(kRanks - 1));
    } else {
      env.barrier();
      int64_t count = env.rank % 2 == 0 ? 3000 : 20;  // rendezvous and eager
      auto out = payload(env.rank, env.rank, count);
      ASSERT_TRUE(env.context.send(out.data(), count, type, 0, env.rank).isOk());
    }
    ASSERT_TRUE(env.context.close(Deadline::after(60s)).isOk());
  }, loopbackCaps(), /*drain=*/false);
}

// Rank 1 is gone before anyone connected to it: rank 0's messages to it
// fail with kPeerFailed naming the connection; rank 2 is unaffected.
TEST(LazyConnect, DeadPeerDuringConnectFailsOnlyItsOperations) {
  Ranks ranks = createRanks(3, lazy());
  auto& contexts = ranks.contexts;
  ASSERT_TRUE(contexts[0] && contexts[1] && contexts[2]);
  Context& survivor = *contexts[0];
  Datatype type = Datatype::of<int32_t>();
  int32_t fromDead = -1;
  auto waiting = survivor.irecv(&fromDead, 1, type, 1, 0);
  ASSERT_TRUE(waiting.isOk());
  contexts[1].reset();
  std::vector<int32_t> big(5000, 5);
  // The first message starts the connection; its request carries the failure.
  auto rendezvous = survivor.isend(big.data(), 5000, type, 1, 0);
  ASSERT_TRUE(rendezvous.isOk());
  for (Request* request : {&*rendezvous, &*waiting}) {
    Status status = survivor.wait(*request, nullptr, Deadline::after(30s));
    EXPECT_EQ(status.code(), Code::kPeerFailed) << status.toString();
    EXPECT_NE(status.message().find("connecting to rank 1"), std::string_view::npos) << status.toString();
  }
  EXPECT_EQ(fromDead, -1);
  // Later ones fail at once.
  EXPECT_EQ(survivor.isend(big.data(), 1, type, 1, 0).status().code(), Code::kPeerFailed);
  EXPECT_EQ(survivor.irecv(&fromDead, 1, type, 1, 0).status().code(), Code::kPeerFailed);
  // Rank 2 connects and exchanges both ways as if nothing happened.
  std::vector<int32_t> in(5000, -1), back(5000, -1);
  auto toSurvivor = contexts[2]->isend(big.data(), 5000, type, 0, 4);
  auto recv = survivor.irecv(in.data(), 5000, type, 2, 4);
  ASSERT_TRUE(toSurvivor.isOk() && recv.isOk());
  ASSERT_TRUE(completeBoth(survivor, *recv, *contexts[2], *toSurvivor));
  EXPECT_TRUE(survivor.wait(*recv).isOk());
  EXPECT_EQ(in, big);
  EXPECT_EQ(survivor.counters().connections, 1u);
}

// A peer that never answers (it does not progress) fails after the
// connect timeout; a bound, not a timing assertion.
TEST(LazyConnect, SilentPeerFailsAfterTheConnectTimeout) {
  Options options = lazy();
  options.connectTimeoutMs = 200;
  runRanks(2, options, [](RankEnv& env) {
    if (env.rank == 0) {
      int32_t value = 1;
      auto send = env.context.isend(&value, 1, Datatype::of<int32_t>(), 1, 0);
      ASSERT_TRUE(send.isOk());
      Status status = env.context.wait(*send, nullptr, Deadline::after(60s));
      EXPECT_EQ(status.code(), Code::kPeerFailed) << status.toString();
      EXPECT_NE(status.message().find("did not answer"), std::string_view::npos) << status.toString();
    }
    env.barrier();  // rank 1 made no progress until now
  }, loopbackCaps(), /*drain=*/false);
}

class CloseTest : public ::testing::TestWithParam<Connect> {};

// Every rank sends a ring of eager and rendezvous messages, waits only for
// its receives, then closes: its sends complete, nothing is lost, and each
// rank destroys its Context at once (no barrier).
TEST_P(CloseTest, CompletesSendsInFlightWithoutABarrier) {
  constexpr int kRanks = 4, kMessages = 24;
  runRanks(kRanks, lazy(GetParam()), [](RankEnv& env) {
    Datatype type = Datatype::of<int32_t>();
    int next = (env.rank + 1) % kRanks, previous = (env.rank + kRanks - 1) % kRanks;
    std::vector<std::vector<int32_t>> out, in;
    std::vector<Request> sends, recvs;
    for (int i = 0; i < kMessages; ++i) {
      out.push_back(payload(env.rank, i, countOf(i)));
      in.emplace_back(static_cast<size_t>(countOf(i)), -1);
    }
    for (int i = 0; i < kMessages; ++i) {
      auto recv = env.context.irecv(in[static_cast<size_t>(i)].data(), countOf(i), type, previous, i);
      auto send = env.context.isend(out[static_cast<size_t>(i)].data(), countOf(i), type, next, i);
      ASSERT_TRUE(recv.isOk() && send.isOk());
      recvs.push_back(std::move(*recv));
      sends.push_back(std::move(*send));
    }
    ASSERT_TRUE(env.context.waitAll(recvs, Deadline::after(60s)).isOk());
    for (int i = 0; i < kMessages; ++i) ASSERT_EQ(in[static_cast<size_t>(i)], payload(previous, i, countOf(i)));
    // A receive nobody sends to is cancelled by close.
    int32_t never = -1;
    auto orphan = env.context.irecv(&never, 1, type, previous, 999);
    ASSERT_TRUE(orphan.isOk());
    Status closed = env.context.close(Deadline::after(60s));
    ASSERT_TRUE(closed.isOk()) << closed.toString();
    EXPECT_TRUE(env.context.closed());
    for (Request& send : sends) {
      auto finished = env.context.test(send);
      ASSERT_TRUE(finished.isOk() && *finished) << "a send was still pending after close";
      EXPECT_TRUE(env.context.wait(send).isOk());
    }
    EXPECT_EQ(env.context.wait(*orphan).code(), Code::kCancelled);
    EXPECT_EQ(never, -1);
    EXPECT_EQ(env.context.isend(&never, 1, type, next, 0).status().code(), Code::kState);
    EXPECT_EQ(env.context.irecv(&never, 1, type, next, 0).status().code(), Code::kState);
    EXPECT_TRUE(env.context.close().isOk());  // idempotent
  }, loopbackCaps(), /*drain=*/false);
}

TEST_P(CloseTest, TimesOutWhileAPeerIsStillOpenThenSucceeds) {
  runRanks(2, lazy(GetParam()), [](RankEnv& env) {
    int32_t value = 5, got = 0;
    Datatype type = Datatype::of<int32_t>();
    if (env.rank == 0) {
      ASSERT_TRUE(env.context.send(&value, 1, type, 1, 0).isOk());
      EXPECT_EQ(env.context.close(Deadline::after(100ms)).code(), Code::kTimeout);
      EXPECT_FALSE(env.context.closed());
      env.barrier();
    } else {
      ASSERT_TRUE(env.context.recv(&got, 1, type, 0, 0).isOk());
      EXPECT_EQ(got, 5);
      env.barrier();  // rank 0's first close gave up meanwhile
    }
    ASSERT_TRUE(env.context.close(Deadline::after(60s)).isOk());
  }, loopbackCaps(), /*drain=*/false);
}

INSTANTIATE_TEST_SUITE_P(Connect, CloseTest, ::testing::Values(Connect::kEager, Connect::kLazy),
                         [](const auto& param) { return param.param == Connect::kEager ? "eager" : "lazy"; });

}  // namespace
}  // namespace ibdt::messaging::testing
