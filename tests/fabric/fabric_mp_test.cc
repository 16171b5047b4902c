// The fabric among real ranks of a job (run by ibdt-run with 2, 4 and 8
// ranks): connectMesh() through the bootstrap Store, then every rank sends
// to, writes to (plain and with immediate) and reads from every other rank,
// over every available provider. Every byte is checked.
#include <cstring>

#include <gtest/gtest.h>

#include "fabric_harness.h"
#include "support/mp_test.h"
#include "transport/fabric/mesh.h"

namespace ibdt::fabric::testing {
namespace {

using test::mpDeadline;
using test::mpStore;

constexpr size_t kBlock = 3 * 4096 + 5;

size_t messageSize(int from, int to) { return 65536 + 7 * static_cast<size_t>(from) + static_cast<size_t>(to); }
uint32_t seedOf(int from, int to, uint32_t kind) { return kind * 10000 + static_cast<uint32_t>(from * 100 + to); }

Result<std::vector<RemoteKey>> allgatherKey(bootstrap::Store& store, const RemoteKey& key) {
  std::vector<uint8_t> wire(RemoteKey::kWireSize);
  key.serialize(std::span<uint8_t, RemoteKey::kWireSize>(wire.data(), RemoteKey::kWireSize));
  IBDT_ASSIGN_OR_RETURN(auto all, store.allgather(wire, mpDeadline()));
  std::vector<RemoteKey> keys;
  for (const auto& bytes : all) {
    IBDT_ASSIGN_OR_RETURN(RemoteKey parsed, RemoteKey::parse(bytes));
    keys.push_back(parsed);
  }
  return keys;
}

TEST(FabricMp, EveryRankToEveryRankEveryOperation) {
  bootstrap::Store& store = mpStore();
  const int me = store.rank();
  const int size = store.size();
  for (const std::string& provider : providersUnderTest()) {
    SCOPED_TRACE("provider " + provider);
    Node node = Node::open(provider, 8192);
    ASSERT_TRUE(node.domain);
    const Caps caps = node.domain->caps();
    uint32_t maxSge = std::min(caps.maxSendSge, caps.maxRecvSge);
    size_t largest = messageSize(size, size);
    std::vector<uint8_t> inbox(size * largest), outbox(size * largest), readable(kBlock), readInto(size * kBlock);
    std::vector<uint8_t> userWindow(size * kBlock), blocks(size * kBlock);
    auto inboxRegion = node.registered(inbox);
    auto outboxRegion = node.registered(outbox);
    auto readableRegion = node.registered(readable, kLocalWrite | kRemoteRead);
    auto readIntoRegion = node.registered(readInto);
    auto userWindowRegion = node.registered(userWindow);
    auto blocksRegion = node.registered(blocks);
    auto sharedWindow = node.allocated(size * kBlock);
    ASSERT_TRUE(inboxRegion && outboxRegion && blocksRegion && readableRegion && readIntoRegion && userWindowRegion && sharedWindow);
    std::memset(sharedWindow->address(), 0, size * kBlock);
    fillPattern(readable.data(), kBlock, seedOf(me, me, 3));

    MeshOptions options;
    options.prepare = [&](Endpoint& endpoint, int peer) -> Status {
      for (uint64_t id : {uint64_t(peer), uint64_t(1000 + peer)}) {
        auto sges = id < 1000 ? splitSges(*inboxRegion, inbox.data() + peer * largest, largest, maxSge)
                              : std::vector<Sge>{};
        RecvRequest request;
        request.id = id;
        request.sgList = sges.data();
        request.numSge = static_cast<uint32_t>(sges.size());
        IBDT_RETURN_IF_ERROR(endpoint.postRecv(request));
      }
      return Status::ok();
    };
    auto mesh = connectMesh(*node.domain, *node.sendQueue, *node.recvQueue, store, options, mpDeadline());
    ASSERT_TRUE(mesh.isOk()) << mesh.status().toString();
    auto& endpoints = *mesh;
    auto userWindows = allgatherKey(store, userWindowRegion->remoteKey());
    auto sharedWindows = allgatherKey(store, sharedWindow->remoteKey());
    auto readables = allgatherKey(store, readableRegion->remoteKey());
    ASSERT_TRUE(userWindows.isOk() && sharedWindows.isOk() && readables.isOk());

    int sends = 0;
    for (int peer = 0; peer < size; ++peer) {
      if (peer == me) continue;
      Endpoint& endpoint = *endpoints[peer];
      uint8_t* message = outbox.data() + peer * largest;
      size_t length = messageSize(me, peer);
      fillPattern(message, length, seedOf(me, peer, 0));
      ASSERT_TRUE(postOne(endpoint, Opcode::kSend, 1, splitSges(*outboxRegion, message, length, maxSge)).isOk());
      // A plain write to the user window, then a write-with-imm to the shared
      // one: when the immediate arrives, both are in place (in order).
      uint8_t* block = blocks.data() + peer * kBlock;
      fillPattern(block, kBlock, seedOf(me, peer, 1));
      RemoteKey user = (*userWindows)[peer];
      RemoteKey shared = (*sharedWindows)[peer];
      ASSERT_TRUE(postOne(endpoint, Opcode::kWrite, 2, splitSges(*blocksRegion, block, kBlock, 3),
                          user.address + me * kBlock, user.rkey, 0, 0).isOk());
      ASSERT_TRUE(postOne(endpoint, Opcode::kWriteWithImm, 3, splitSges(*blocksRegion, block, kBlock, 1),
                          shared.address + me * kBlock, shared.rkey, static_cast<uint32_t>(me)).isOk());
      sends += 2;
      if (caps.rdmaRead) {
        RemoteKey theirs = (*readables)[peer];
        ASSERT_TRUE(postOne(endpoint, Opcode::kRead, 4, splitSges(*readIntoRegion, readInto.data() + peer * kBlock, kBlock, maxSge),
                            theirs.address, theirs.rkey).isOk());
        ++sends;
      }
    }
    for (int i = 0; i < sends; ++i) expectSuccess(*node.sendQueue);
    for (int i = 0; i < 2 * (size - 1); ++i) {
      Completion received = expectSuccess(*node.recvQueue);
      ASSERT_EQ(received.status, CompletionStatus::kSuccess);
      if (received.opcode == Opcode::kRecv) {
        int from = static_cast<int>(received.id);
        EXPECT_EQ(received.byteLength, messageSize(from, me));
        EXPECT_EQ(firstMismatch(inbox.data() + from * largest, messageSize(from, me), seedOf(from, me, 0)), -1)
            << "message from rank " << from;
      } else {
        int from = static_cast<int>(received.immData);
        EXPECT_EQ(received.id, 1000u + from);
        auto* shared = static_cast<uint8_t*>(sharedWindow->address());
        EXPECT_EQ(firstMismatch(shared + from * kBlock, kBlock, seedOf(from, me, 1)), -1) << "shared window, rank " << from;
        EXPECT_EQ(firstMismatch(userWindow.data() + from * kBlock, kBlock, seedOf(from, me, 1)), -1)
            << "user window, rank " << from;
      }
    }
    for (int peer = 0; caps.rdmaRead && peer < size; ++peer) {
      if (peer == me) continue;
      EXPECT_EQ(firstMismatch(readInto.data() + peer * kBlock, kBlock, seedOf(peer, peer, 3)), -1) << "read from " << peer;
    }
    // Nobody tears down while a peer may still read from it.
    ASSERT_TRUE(store.barrier(mpDeadline()).isOk());
  }
}

}  // namespace
}  // namespace ibdt::fabric::testing
