// The Store as real ranks see it: run by ibdt_add_mp_gtest under each
// launcher (ibdt-run, mpirun/PMIx, mpiexec/PMI-1).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <set>
#include <thread>

#include "bootstrap/store_test_util.h"
#include "support/mp_test.h"

namespace ibdt::bootstrap {
namespace {

using namespace std::chrono_literals;
using test::mpDeadline;
using test::mpStore;
using test::patternBlob;

TEST(StoreMp, PlacementIsConsistentAcrossRanks) {
  Store& store = mpStore();
  ASSERT_GE(store.size(), 1);
  ASSERT_GE(store.rank(), 0);
  ASSERT_LT(store.rank(), store.size());
  ASSERT_LT(store.localRank(), store.localSize());
  ASSERT_LT(store.nodeId(), store.numNodes());
  // Gather everyone's placement; it must describe one consistent node map.
  int mine[4] = {store.rank(), store.nodeId(), store.localRank(), store.localSize()};
  auto all = store.allgather(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(mine), sizeof(mine)), mpDeadline());
  ASSERT_TRUE(all.isOk()) << all.status().toString();
  std::vector<std::set<int>> localRanksOfNode(static_cast<size_t>(store.numNodes()));
  std::vector<int> sizeOfNode(static_cast<size_t>(store.numNodes()), -1);
  for (int peer = 0; peer < store.size(); ++peer) {
    ASSERT_EQ((*all)[static_cast<size_t>(peer)].size(), sizeof(mine));
    int theirs[4];
    std::memcpy(theirs, (*all)[static_cast<size_t>(peer)].data(), sizeof(theirs));
    EXPECT_EQ(theirs[0], peer);
    ASSERT_GE(theirs[1], 0);
    ASSERT_LT(theirs[1], store.numNodes());
    auto node = static_cast<size_t>(theirs[1]);
    EXPECT_TRUE(localRanksOfNode[node].insert(theirs[2]).second) << "local rank " << theirs[2] << " twice on node " << node;
    if (sizeOfNode[node] < 0) sizeOfNode[node] = theirs[3];
    EXPECT_EQ(sizeOfNode[node], theirs[3]);
  }
  for (size_t node = 0; node < localRanksOfNode.size(); ++node) {
    EXPECT_EQ(static_cast<int>(localRanksOfNode[node].size()), sizeOfNode[node]) << "node " << node;
  }
}

TEST(StoreMp, AllToAllEndpointExchange) {
  Store& store = mpStore();
  // A distinct blob for every (sender, receiver) pair.
  for (int peer = 0; peer < store.size(); ++peer) {
    ASSERT_TRUE(store.put("ep." + std::to_string(peer), patternBlob(store.rank(), peer, 100 + static_cast<size_t>(peer))).isOk());
  }
  ASSERT_TRUE(store.commit().isOk());
  ASSERT_TRUE(store.fence(mpDeadline()).isOk());
  for (int peer = 0; peer < store.size(); ++peer) {
    auto value = store.get(peer, "ep." + std::to_string(store.rank()), mpDeadline());
    ASSERT_TRUE(value.isOk()) << value.status().toString();
    EXPECT_EQ(*value, patternBlob(peer, store.rank(), 100 + static_cast<size_t>(store.rank()))) << "from rank " << peer;
  }
}

TEST(StoreMp, LargeBlobsSurviveIntact) {
  Store& store = mpStore();
  // Larger than PMI-1's value limit, so that backend must split and encode.
  constexpr size_t kSize = 200'000;
  ASSERT_TRUE(store.put("big", patternBlob(store.rank(), 99, kSize)).isOk());
  ASSERT_TRUE(store.commit().isOk());
  ASSERT_TRUE(store.fence(mpDeadline()).isOk());
  int peer = (store.rank() + 1) % store.size();
  auto value = store.get(peer, "big", mpDeadline());
  ASSERT_TRUE(value.isOk()) << value.status().toString();
  EXPECT_EQ(*value, patternBlob(peer, 99, kSize));
}

TEST(StoreMp, EmptyAndBinaryValues) {
  Store& store = mpStore();
  Bytes binary{0, 1, 0xff, '=', ' ', '\n', 0};
  binary.push_back(static_cast<uint8_t>(store.rank()));
  ASSERT_TRUE(store.put("binary", binary).isOk());
  ASSERT_TRUE(store.put("empty", Bytes{}).isOk());
  ASSERT_TRUE(store.commit().isOk());
  ASSERT_TRUE(store.fence(mpDeadline()).isOk());
  int peer = store.size() - 1 - store.rank();
  auto got = store.get(peer, "binary", mpDeadline());
  ASSERT_TRUE(got.isOk()) << got.status().toString();
  Bytes expected{0, 1, 0xff, '=', ' ', '\n', 0, static_cast<uint8_t>(peer)};
  EXPECT_EQ(*got, expected);
  auto empty = store.get(peer, "empty", mpDeadline());
  ASSERT_TRUE(empty.isOk()) << empty.status().toString();
  EXPECT_TRUE(empty->empty());
}

TEST(StoreMp, RepeatedRoundsSeeTheirOwnValues) {
  Store& store = mpStore();
  for (int round = 0; round < 5; ++round) {
    auto all = store.allgather(patternBlob(store.rank(), round, 16), mpDeadline());
    ASSERT_TRUE(all.isOk()) << all.status().toString();
    for (int peer = 0; peer < store.size(); ++peer) {
      EXPECT_EQ((*all)[static_cast<size_t>(peer)], patternBlob(peer, round, 16)) << "round " << round;
    }
    ASSERT_TRUE(store.barrier(mpDeadline()).isOk());
  }
}

TEST(StoreMp, GetOfAKeyNobodyPutsFailsAtTheDeadline) {
  Store& store = mpStore();
  int peer = (store.rank() + 1) % store.size();
  auto value = store.get(peer, "nobody-puts-this", Deadline::after(200ms));
  ASSERT_FALSE(value.isOk());
  // Every backend names the missing rank; some (PMI-1) know at once that the
  // key does not exist, the others wait out the deadline.
  EXPECT_TRUE(value.status().code() == Code::kTimeout || value.status().code() == Code::kNotFound)
      << value.status().toString();
  EXPECT_NE(value.status().message().find("rank " + std::to_string(peer)), std::string_view::npos)
      << value.status().toString();
  EXPECT_EQ(store.get(store.size(), "k", mpDeadline()).status().code(), Code::kInvalidArgument);
}

TEST(StoreMp, ThreadsMayUseTheStoreConcurrently) {
  Store& store = mpStore();
  constexpr int kThreads = 4;
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_TRUE(store.put("thread." + std::to_string(t), patternBlob(store.rank(), 1000 + t, 32)).isOk());
  }
  ASSERT_TRUE(store.commit().isOk());
  ASSERT_TRUE(store.fence(mpDeadline()).isOk());
  std::vector<std::thread> threads;
  std::vector<int> wrong(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int peer = 0; peer < store.size(); ++peer) {
        auto value = store.get(peer, "thread." + std::to_string(t), mpDeadline());
        if (!value.isOk() || *value != patternBlob(peer, 1000 + t, 32)) ++wrong[t];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(wrong[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace ibdt::bootstrap
