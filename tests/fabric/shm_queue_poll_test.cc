// shm only: the two completion queues of a domain share its activity
// summary; a poll right after the other queue's skips its own run
// (transport/fabric/shm/completion_queue.cc). A queue then polled alone
// must still find what arrives: a bounded number of polls, every byte
// checked.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>

#include "fabric_harness.h"

namespace ibdt::fabric::testing {
namespace {

// Polls `queue` alone, at most `polls` times, for one completion.
bool pollAlone(CompletionQueue& queue, int polls, Completion& got) {
  for (int i = 0; i < polls; ++i) {
    if (queue.poll(std::span(&got, 1)) == 1) return true;
  }
  return false;
}

TEST(ShmQueuePoll, AQueuePolledAloneAfterASkippedRunFindsTheArrival) {
  constexpr size_t kBytes = 700;
  auto statuses = runForked(2, [&](Mesh& mesh) {
    auto [node, endpoint] = connectToPeer(mesh, "shm");
    ASSERT_TRUE(endpoint);
    std::vector<uint8_t> buffer(kBytes);
    auto region = node.registered(buffer);
    ASSERT_TRUE(region);
    if (mesh.rank() == 0) {
      fillPattern(buffer.data(), kBytes, 41);
      mesh.barrier();  // the peer's receive is posted and its queues took turns
      ASSERT_TRUE(postOne(*endpoint, Opcode::kSend, 1, splitSges(*region, buffer.data(), kBytes, 2)).isOk());
      EXPECT_EQ(expectSuccess(*node.sendQueue).id, 1u);
      mesh.barrier();
      return;
    }
    postReceive(*endpoint, 9, splitSges(*region, buffer.data(), kBytes, 1));
    std::array<Completion, 1> none{};
    // The queues take turns: the receive queue's next poll skips its run,
    // as it follows the send queue's.
    EXPECT_EQ(node.recvQueue->poll(none), 0u);
    EXPECT_EQ(node.sendQueue->poll(none), 0u);
    EXPECT_EQ(node.recvQueue->poll(none), 0u);
    mesh.barrier();
    mesh.barrier();  // the send completed on the peer: the bytes are in our buffer, announced
    Completion got{};
    ASSERT_TRUE(pollAlone(*node.recvQueue, 2, got)) << "the receive queue polled alone did not progress";
    EXPECT_EQ(got.id, 9u);
    EXPECT_EQ(got.status, CompletionStatus::kSuccess);
    EXPECT_EQ(got.byteLength, kBytes);
    EXPECT_EQ(firstMismatch(buffer.data(), kBytes, 41), -1);
  });
  expectAllPassed(statuses);
}

// A queue polled only right after another queue of the domain (two
// Contexts on one domain, polled in turn) skips every activity run; its
// endpoints' liveness sweep must still run, or a receive from a peer that
// died before sending anything would wait forever. The receiving endpoint
// is made cold first: four others turn active after it, so the activity
// summary no longer visits it (activity.h, kHot) and only the sweep can.
TEST(ShmQueuePoll, AQueueThatAlwaysFollowsAnotherStillFindsADeadPeer) {
  constexpr int kEndpoints = 5;  // the first is the cold one
  auto statuses = runForked(2, [&](Mesh& mesh) {
    Node node = Node::open("shm");
    ASSERT_TRUE(node.domain);
    std::vector<std::unique_ptr<Endpoint>> endpoints;
    for (int i = 0; i < kEndpoints; ++i) {
      endpoints.push_back(node.endpoint());
      ASSERT_TRUE(endpoints.back());
      ASSERT_TRUE(endpoints.back()->connect(mesh.swap(1 - mesh.rank(), endpoints.back()->address())).isOk());
    }
    std::vector<uint8_t> buffer(kEndpoints * 64);
    auto region = node.registered(buffer);
    ASSERT_TRUE(region);
    if (mesh.rank() == 1) {
      mesh.barrier();  // rank 0 posted its receives
      for (int i = 1; i < kEndpoints; ++i) {
        fillPattern(buffer.data() + i * 64, 64, static_cast<uint32_t>(i));
        ASSERT_TRUE(postOne(*endpoints[i], Opcode::kSend, i, splitSges(*region, buffer.data() + i * 64, 64, 1)).isOk());
        EXPECT_EQ(expectSuccess(*node.sendQueue).id, static_cast<uint64_t>(i));
      }
      mesh.swap(0, word(static_cast<uint64_t>(getpid())));
      for (;;) pause();  // killed by rank 0
    }
    for (int i = 0; i < kEndpoints; ++i) {
      postReceive(*endpoints[i], 100 + i, splitSges(*region, buffer.data() + i * 64, 64, 1));
    }
    auto other = node.domain->createCompletionQueue(64);  // another Context's queue, no endpoints
    ASSERT_TRUE(other.isOk());
    std::array<Completion, 1> none{};
    mesh.barrier();
    std::vector<uint64_t> arrived;  // endpoints 1..4 turn active after endpoint 0, in any order
    for (int i = 1; i < kEndpoints; ++i) arrived.push_back(expectSuccess(*node.recvQueue).id);
    std::sort(arrived.begin(), arrived.end());
    EXPECT_EQ(arrived, (std::vector<uint64_t>{101, 102, 103, 104}));
    for (int i = 1; i < kEndpoints; ++i) {
      EXPECT_EQ(firstMismatch(buffer.data() + i * 64, 64, static_cast<uint32_t>(i)), -1) << "endpoint " << i;
    }
    const auto victim = static_cast<pid_t>(unword(mesh.swap(1, {})));
    ASSERT_GT(victim, 0);
    ASSERT_EQ(kill(victim, SIGKILL), 0);
    // Bounded: the liveness interval is 10 ms; 20 s means the sweep never ran.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    Completion got{};
    bool found = false;
    while (!found && std::chrono::steady_clock::now() < deadline) {
      (void)(*other)->poll(none);
      found = node.recvQueue->poll(std::span(&got, 1)) == 1;
      if (!found) sched_yield();
    }
    ASSERT_TRUE(found) << "the receive from the dead peer never completed";
    EXPECT_EQ(got.id, 100u);
    EXPECT_NE(got.status, CompletionStatus::kSuccess);
  });
  ASSERT_EQ(statuses.size(), 2u);
  EXPECT_TRUE(WIFEXITED(statuses[0]) && WEXITSTATUS(statuses[0]) == 0) << "survivor failed";
  EXPECT_TRUE(WIFSIGNALED(statuses[1]) && WTERMSIG(statuses[1]) == SIGKILL);
}

}  // namespace
}  // namespace ibdt::fabric::testing
