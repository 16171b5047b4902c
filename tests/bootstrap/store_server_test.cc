// The ibdt-run store server and its client, in one process: ranks are
// threads, each with its own connection.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>
#include <vector>

#include "bootstrap/fd_io.h"
#include "bootstrap/launcher/store_server.h"
#include "bootstrap/launcher_store.h"
#include "bootstrap/node_map.h"
#include "bootstrap/store_wire.h"
#include "bootstrap/store_server_fixture.h"
#include "bootstrap/store_test_util.h"

namespace ibdt::bootstrap {
namespace {

using namespace std::chrono_literals;
using test::patternBlob;
using test::toBytes;
using test::toString;

TEST_F(StoreServerTest, SocketIsPrivateToTheUser) {
  start(1);
  struct stat info {};
  ASSERT_EQ(::stat(path_.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
}

TEST_F(StoreServerTest, PlacementFollowsTheNodeMap) {
  start(5, 2);  // nodes {0,0,0,1,1}
  auto stores = connectAll(5);
  const int expectedNode[] = {0, 0, 0, 1, 1};
  const int expectedLocalRank[] = {0, 1, 2, 0, 1};
  const int expectedLocalSize[] = {3, 3, 3, 2, 2};
  for (int rank = 0; rank < 5; ++rank) {
    const Store& store = *stores[static_cast<size_t>(rank)];
    EXPECT_EQ(store.backend(), "ibdt-run");
    EXPECT_EQ("/tmp/" + store.jobId(), directory_);
    EXPECT_EQ(store.rank(), rank);
    EXPECT_EQ(store.size(), 5);
    EXPECT_EQ(store.nodeId(), expectedNode[rank]);
    EXPECT_EQ(store.numNodes(), 2);
    EXPECT_EQ(store.localRank(), expectedLocalRank[rank]);
    EXPECT_EQ(store.localSize(), expectedLocalSize[rank]);
  }
}

TEST_F(StoreServerTest, FenceMakesEveryCommittedValueVisible) {
  constexpr int kSize = 4;
  start(kSize);
  auto stores = connectAll(kSize);
  std::vector<std::thread> ranks;
  std::vector<std::string> errors(kSize);
  for (int rank = 0; rank < kSize; ++rank) {
    ranks.emplace_back([&, rank] {
      Store& store = *stores[static_cast<size_t>(rank)];
      // Large enough to need many socket reads on both sides.
      auto blob = patternBlob(rank, 7, 300'000 + static_cast<size_t>(rank));
      if (!store.put("endpoint", blob).isOk() || !store.commit().isOk()) errors[rank] = "put/commit failed";
      if (Status s = store.fence(Deadline::after(30s)); !s.isOk()) errors[rank] = s.toString();
      for (int peer = 0; peer < kSize; ++peer) {
        auto value = store.get(peer, "endpoint", Deadline::after(30s));
        if (!value.isOk()) {
          errors[rank] = value.status().toString();
        } else if (*value != patternBlob(peer, 7, 300'000 + static_cast<size_t>(peer))) {
          errors[rank] = "wrong bytes from rank " + std::to_string(peer);
        }
      }
    });
  }
  for (auto& thread : ranks) thread.join();
  for (int rank = 0; rank < kSize; ++rank) EXPECT_EQ(errors[rank], "") << "rank " << rank;
}

TEST_F(StoreServerTest, GetWaitsForALaterCommit) {
  start(2);
  auto stores = connectAll(2);
  std::thread writer([&] {
    std::this_thread::sleep_for(20ms);
    ASSERT_TRUE(stores[1]->put("late", "value").isOk());
    ASSERT_TRUE(stores[1]->commit().isOk());
  });
  auto value = stores[0]->get(1, "late", Deadline::after(30s));
  writer.join();
  ASSERT_TRUE(value.isOk()) << value.status().toString();
  EXPECT_EQ(toString(*value), "value");
}

TEST_F(StoreServerTest, PutReplacesAndUncommittedValuesStayInvisible) {
  start(2);
  auto stores = connectAll(2);
  ASSERT_TRUE(stores[0]->put("k", "first").isOk());
  ASSERT_TRUE(stores[0]->put("k", "second").isOk());
  auto early = stores[1]->get(0, "k", Deadline::after(50ms));
  EXPECT_EQ(early.status().code(), Code::kTimeout);
  ASSERT_TRUE(stores[0]->commit().isOk());
  auto value = stores[1]->get(0, "k", Deadline::after(10s));
  ASSERT_TRUE(value.isOk());
  EXPECT_EQ(toString(*value), "second");
}

TEST_F(StoreServerTest, GetOfAKeyNobodyPutsTimesOutNamingTheRank) {
  start(3);
  auto stores = connectAll(3);
  auto value = stores[0]->get(2, "never-put", Deadline::after(100ms));
  ASSERT_EQ(value.status().code(), Code::kTimeout);
  EXPECT_NE(value.status().message().find("rank 2"), std::string_view::npos) << value.status().toString();
  EXPECT_NE(value.status().message().find("never-put"), std::string_view::npos);
  // The connection stays usable after a timeout.
  ASSERT_TRUE(stores[2]->put("now", "here").isOk());
  ASSERT_TRUE(stores[2]->commit().isOk());
  auto later = stores[0]->get(2, "now", Deadline::after(10s));
  ASSERT_TRUE(later.isOk());
  EXPECT_EQ(toString(*later), "here");
}

TEST_F(StoreServerTest, FenceTimesOutNamingTheMissingRanks) {
  start(3);
  auto stores = connectAll(3);
  std::thread one([&] { EXPECT_EQ(stores[1]->fence(Deadline::after(200ms)).code(), Code::kTimeout); });
  Status status = stores[0]->fence(Deadline::after(200ms));
  one.join();
  ASSERT_EQ(status.code(), Code::kTimeout);
  EXPECT_NE(status.message().find("2 did not arrive"), std::string_view::npos) << status.toString();
}

TEST_F(StoreServerTest, AnEndedRankFailsWaitsOnIt) {
  start(3);
  auto stores = connectAll(3);
  std::thread waiter([&] {
    auto value = stores[0]->get(1, "from-the-dead", Deadline::never());
    EXPECT_EQ(value.status().code(), Code::kPeerFailed);
    EXPECT_NE(value.status().message().find("rank 1 was killed by signal 11"), std::string_view::npos)
        << value.status().toString();
  });
  std::thread fencer([&] {
    Status status = stores[2]->fence(Deadline::never());
    EXPECT_EQ(status.code(), Code::kPeerFailed) << status.toString();
  });
  std::this_thread::sleep_for(20ms);
  server_->rankEnded(1, "was killed by signal 11");
  waiter.join();
  fencer.join();
  // Later fences fail at once instead of waiting for the dead.
  EXPECT_EQ(stores[0]->fence(Deadline::never()).code(), Code::kPeerFailed);
}

TEST_F(StoreServerTest, ManyThreadsShareOneConnection) {
  start(2);
  auto stores = connectAll(2);
  constexpr int kThreads = 8;
  constexpr int kKeys = 50;
  for (int i = 0; i < kThreads * kKeys; ++i) {
    ASSERT_TRUE(stores[1]->put("key" + std::to_string(i), patternBlob(1, i, 64 + static_cast<size_t>(i))).isOk());
  }
  std::vector<std::thread> threads;
  std::vector<int> wrong(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < kKeys; ++k) {
        int i = t * kKeys + k;
        auto value = stores[0]->get(1, "key" + std::to_string(i), Deadline::after(30s));
        if (!value.isOk() || *value != patternBlob(1, i, 64 + static_cast<size_t>(i))) ++wrong[t];
      }
    });
  }
  // Commit while the readers already wait.
  ASSERT_TRUE(stores[1]->commit().isOk());
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(wrong[t], 0) << "thread " << t;
}

TEST_F(StoreServerTest, StrangerWithoutTheTokenIsRefused) {
  start(2);
  auto stranger = LauncherStore::connect(path_, "not-the-token-not-the-token-0000", 0, Deadline::after(10s));
  ASSERT_EQ(stranger.status().code(), Code::kProtocol);
  EXPECT_NE(stranger.status().message().find("wrong job token"), std::string_view::npos)
      << stranger.status().toString();
  EXPECT_EQ(server_->rejectedConnections(), 1);
  // A raw client that sends garbage instead of a hello is cut off too.
  auto fd = connectUnix(path_);
  ASSERT_TRUE(fd.isOk());
  std::string garbage = wire::Writer(wire::Op::kGet, 1).u32(0).blob("k").u64(0).frame();
  ASSERT_TRUE(writeAll(*fd, garbage, Deadline::after(10s), "test").isOk());
  char byte;
  std::string reply;
  while (::recv(*fd, &byte, 1, 0) == 1) reply.push_back(byte);  // ends when the server closes
  ::close(*fd);
  EXPECT_NE(reply.find("must present the job token"), std::string::npos);
  EXPECT_EQ(server_->rejectedConnections(), 2);
  // The job itself is unaffected.
  auto stores = connectAll(2);
  ASSERT_TRUE(stores[0]->put("k", "v").isOk());
  ASSERT_TRUE(stores[0]->commit().isOk());
  auto value = stores[1]->get(0, "k", Deadline::after(10s));
  ASSERT_TRUE(value.isOk());
  EXPECT_EQ(toString(*value), "v");
}

TEST_F(StoreServerTest, RankOutsideTheJobIsRefused) {
  start(2);
  auto store = LauncherStore::connect(path_, kToken, 2, Deadline::after(10s));
  ASSERT_EQ(store.status().code(), Code::kProtocol);
  EXPECT_NE(store.status().message().find("rank 2 is outside the job of 2"), std::string_view::npos);
  auto stores = connectAll(2);
  EXPECT_EQ(stores[0]->get(2, "k", Deadline::after(1s)).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(stores[0]->get(-1, "k", Deadline::after(1s)).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(stores[0]->get(1, "", Deadline::after(1s)).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(stores[0]->put("", "v").code(), Code::kInvalidArgument);
}

TEST_F(StoreServerTest, ServerGoneFailsTheClientInsteadOfHanging) {
  start(2);
  auto stores = connectAll(2);
  server_->stop();
  Status status = stores[0]->fence(Deadline::after(30s));
  EXPECT_EQ(status.code(), Code::kPeerFailed) << status.toString();
  // And stays failed.
  EXPECT_EQ(stores[0]->get(1, "k", Deadline::after(30s)).status().code(), Code::kPeerFailed);
}

TEST_F(StoreServerTest, AllgatherReturnsEveryContributionByRank) {
  constexpr int kSize = 4;
  start(kSize);
  auto stores = connectAll(kSize);
  std::vector<std::thread> ranks;
  std::vector<int> wrong(kSize, 0);
  for (int rank = 0; rank < kSize; ++rank) {
    ranks.emplace_back([&, rank] {
      for (int round = 0; round < 3; ++round) {
        auto all = stores[static_cast<size_t>(rank)]->allgather(patternBlob(rank, round, 40), Deadline::after(30s));
        if (!all.isOk() || all->size() != kSize) {
          ++wrong[rank];
          continue;
        }
        for (int peer = 0; peer < kSize; ++peer) {
          if ((*all)[static_cast<size_t>(peer)] != patternBlob(peer, round, 40)) ++wrong[rank];
        }
      }
    });
  }
  for (auto& thread : ranks) thread.join();
  for (int rank = 0; rank < kSize; ++rank) EXPECT_EQ(wrong[rank], 0) << "rank " << rank;
}

}  // namespace
}  // namespace ibdt::bootstrap
