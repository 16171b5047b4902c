// shm only: with cross-memory attach disabled (IBDT_SHM_CMA=off, as when
// ptrace restrictions forbid it) one-sided access to user memory and sends
// into user-memory receives go through the initiator's bounce buffer, in
// chunks, carried out by the target while it polls. Every byte is checked.
#include <stdlib.h>

#include <cstring>

#include <gtest/gtest.h>

#include "fabric_harness.h"
#include "transport/fabric/shm/remote_copy.h"

namespace ibdt::fabric::testing {
namespace {

TEST(ShmBounce, EveryOperationOnUserMemoryWithoutCrossMemoryAttach) {
  constexpr size_t kLarge = (1u << 20) + 5;  // several bounce chunks
  constexpr size_t kSend = 300000;
  constexpr size_t kImm = 1000;
  auto statuses = runForked(2, [&](Mesh& mesh) {
    setenv("IBDT_SHM_CMA", "off", 1);
    Node node = Node::open("shm");
    ASSERT_TRUE(node.domain);
    uint32_t maxSge = node.domain->caps().maxSendSge;
    auto endpoint = node.endpoint();
    ASSERT_TRUE(endpoint);
    std::vector<uint8_t> source(kLarge), written(kLarge + 64), inbox(kSend + 64), tagged(kImm);
    auto sourceRegion = node.registered(source);
    auto writtenRegion = node.registered(written);
    auto inboxRegion = node.registered(inbox);
    auto taggedRegion = node.registered(tagged);
    const int peer = 1 - mesh.rank();
    if (mesh.rank() == 1) {
      fillPattern(source.data(), kLarge, 1);  // rank 0 reads it
      postReceive(*endpoint, 10, splitSges(*inboxRegion, inbox.data(), kSend + 64, maxSge));
      postReceive(*endpoint, 11, {});
    }
    ASSERT_TRUE(endpoint->connect(mesh.swap(peer, endpoint->address())).isOk());
    auto peerSource = RemoteKey::parse(mesh.swap(peer, keyBytes(sourceRegion->remoteKey())));
    auto peerWritten = RemoteKey::parse(mesh.swap(peer, keyBytes(writtenRegion->remoteKey())));
    auto peerTagged = RemoteKey::parse(mesh.swap(peer, keyBytes(taggedRegion->remoteKey())));
    ASSERT_TRUE(peerSource.isOk() && peerWritten.isOk() && peerTagged.isOk());
    if (mesh.rank() == 1) {
      // Polling for the two messages is what carries out rank 0's requests.
      Completion sent = expectSuccess(*node.recvQueue);
      EXPECT_EQ(sent.id, 10u);
      EXPECT_EQ(sent.byteLength, kSend);
      EXPECT_EQ(firstMismatch(inbox.data(), kSend, 3), -1);
      EXPECT_EQ(firstMismatch(written.data(), kLarge, 2), -1);  // the write came before the send
      for (size_t i = kLarge; i < written.size(); ++i) ASSERT_EQ(written[i], 0);
      Completion imm = expectSuccess(*node.recvQueue);
      EXPECT_EQ(imm.opcode, Opcode::kRecvWriteWithImm);
      EXPECT_EQ(imm.immData, 77u);
      EXPECT_EQ(firstMismatch(tagged.data(), kImm, 4), -1);
      mesh.barrier();
      return;
    }
    // Rank 0: read, write, send, write-with-imm, each through the bounce path.
    ASSERT_TRUE(postOne(*endpoint, Opcode::kRead, 1, splitSges(*sourceRegion, source.data(), kLarge, maxSge),
                        peerSource->address, peerSource->rkey).isOk());
    expectSuccess(*node.sendQueue);
    EXPECT_EQ(firstMismatch(source.data(), kLarge, 1), -1) << "read through the bounce buffer";
    fillPattern(source.data(), kLarge, 2);
    ASSERT_TRUE(postOne(*endpoint, Opcode::kWrite, 2, splitSges(*sourceRegion, source.data(), kLarge, maxSge),
                        peerWritten->address, peerWritten->rkey).isOk());
    fillPattern(inbox.data(), kSend, 3);
    ASSERT_TRUE(postOne(*endpoint, Opcode::kSend, 3, splitSges(*inboxRegion, inbox.data(), kSend, 5)).isOk());
    fillPattern(tagged.data(), kImm, 4);
    ASSERT_TRUE(postOne(*endpoint, Opcode::kWriteWithImm, 4, splitSges(*taggedRegion, tagged.data(), kImm, 1),
                        peerTagged->address, peerTagged->rkey, 77).isOk());
    for (uint64_t id : {2u, 3u, 4u}) EXPECT_EQ(expectSuccess(*node.sendQueue).id, id);
    // Protection still holds on the bounce path.
    ASSERT_TRUE(postOne(*endpoint, Opcode::kWrite, 5, splitSges(*sourceRegion, source.data(), 64, 1),
                        peerWritten->address + kLarge + 64 - 8, peerWritten->rkey).isOk());
    EXPECT_EQ(nextCompletion(*node.sendQueue).status, CompletionStatus::kRemoteAccess);
    mesh.barrier();
  });
  expectAllPassed(statuses);
  EXPECT_TRUE(ibdtShmFiles().empty());
}

// Regression: with IBDT_SHM_CMA=off the process still let any process of
// its user ptrace it (PR_SET_PTRACER_ANY). Forked: the grant is per process.
TEST(ShmBounce, CrossMemoryAttachOffGrantsNoPtracePermission) {
  // A fork inherits the grant: it must not have happened in this process yet.
  if (shm::peersMayAttach()) GTEST_SKIP() << "an earlier test granted it here; ctest runs each test alone";
  expectAllPassed(runForked(1, [](Mesh&) {
    setenv("IBDT_SHM_CMA", "off", 1);
    Node node = Node::open("shm");
    ASSERT_TRUE(node.domain);
    EXPECT_FALSE(shm::peersMayAttach());
  }));
  expectAllPassed(runForked(1, [](Mesh&) {
    setenv("IBDT_SHM_CMA", "auto", 1);
    Node node = Node::open("shm");
    ASSERT_TRUE(node.domain);
    EXPECT_EQ(shm::peersMayAttach(), shm::crossMemoryAttachAvailable());
  }));
}

}  // namespace
}  // namespace ibdt::fabric::testing
