// shm only: the two completion queues of a domain share its activity
// summary; a poll right after the other queue's skips its own run
// (transport/fabric/shm/completion_queue.cc). A queue then polled alone
// must still find what arrives: a bounded number of polls, every byte
// checked.
#include <gtest/gtest.h>

#include <array>

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

}  // namespace
}  // namespace ibdt::fabric::testing
