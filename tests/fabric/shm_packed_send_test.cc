// shm only: postSendPacked writes a SEND's payload straight into the peer's
// mapped receive buffer. It happens at once and in order, or not at all
// (kAgain, the pack not called); a pack error posts nothing and leaves the
// receive for the next send. Every byte is checked.
#include <cstring>

#include <gtest/gtest.h>

#include "fabric_harness.h"

namespace ibdt::fabric::testing {
namespace {

struct Packer {
  uint32_t length = 0;
  uint32_t seed = 0;
  int calls = 0;
  bool fail = false;
  PackedSend send(uint64_t id, uint32_t flags = kSignaled) {
    return PackedSend{id, flags, length, &Packer::pack, this};
  }
  static Status pack(void* context, uint8_t* out) {
    auto& self = *static_cast<Packer*>(context);
    ++self.calls;
    fillPattern(out, self.length, self.seed);
    if (self.fail) return makeError(Code::kInvalidArgument, "pack refused");
    return Status::ok();
  }
};

TEST(ShmPackedSend, InPlaceOnlyWhenItCanBeDoneAtOnceAndInOrder) {
  constexpr size_t kSlot = 4096;
  auto statuses = runForked(2, [&](Mesh& mesh) {
    auto [node, endpoint] = connectToPeer(mesh, "shm");
    ASSERT_TRUE(endpoint);
    auto inbox = node.allocated(3 * kSlot);  // shared memory: the peer maps it
    std::vector<uint8_t> user(kSlot);
    auto userRegion = node.registered(user);  // private memory: not mappable
    ASSERT_TRUE(inbox && userRegion);
    auto* slots = static_cast<uint8_t*>(inbox->address());
    if (mesh.rank() == 0) {
      Packer packer{1000, 7};
      // No receive posted yet: not now, and the pack is not called.
      EXPECT_EQ(endpoint->postSendPacked(packer.send(1)).code(), Code::kAgain);
      EXPECT_EQ(packer.calls, 0);
      mesh.barrier();  // rank 1 posted: a user-memory receive, then two mapped ones
      mesh.barrier();
      EXPECT_EQ(endpoint->postSendPacked(packer.send(2)).code(), Code::kAgain) << "user memory is not mapped";
      EXPECT_EQ(packer.calls, 0);
      // Through the ordinary path instead (it consumes the user-memory receive).
      std::vector<uint8_t> plain(600);
      fillPattern(plain.data(), plain.size(), 3);
      auto plainRegion = node.registered(plain);
      ASSERT_TRUE(postOne(*endpoint, Opcode::kSend, 3, splitSges(*plainRegion, plain.data(), plain.size(), 1)).isOk());
      EXPECT_EQ(expectSuccess(*node.sendQueue).id, 3u);
      // A pack that fails posts nothing: the receive stays for the next send.
      packer.fail = true;
      EXPECT_EQ(endpoint->postSendPacked(packer.send(4)).code(), Code::kInvalidArgument);
      EXPECT_EQ(packer.calls, 1);
      packer.fail = false;
      ASSERT_TRUE(endpoint->postSendPacked(packer.send(5)).isOk());
      Completion done = expectSuccess(*node.sendQueue);
      EXPECT_EQ(done.id, 5u);
      EXPECT_EQ(done.byteLength, 1000u);
      // Larger than the receive: not in place (the ordinary path reports it).
      Packer big{static_cast<uint32_t>(kSlot + 1), 9};
      EXPECT_EQ(endpoint->postSendPacked(big.send(6)).code(), Code::kAgain);
      EXPECT_EQ(big.calls, 0);
      // Unsignaled: no completion on success.
      Packer last{kSlot, 11};
      ASSERT_TRUE(endpoint->postSendPacked(last.send(7, 0)).isOk());
      EXPECT_TRUE(staysEmpty(*node.sendQueue, 50));
      mesh.barrier();
      return;
    }
    mesh.barrier();
    postReceive(*endpoint, 20, splitSges(*userRegion, user.data(), kSlot, 1));
    postReceive(*endpoint, 21, {Sge{reinterpret_cast<uint64_t>(slots), kSlot, inbox->lkey()}});
    postReceive(*endpoint, 22, {Sge{reinterpret_cast<uint64_t>(slots + kSlot), kSlot, inbox->lkey()}});
    std::memset(slots, 0xEE, 3 * kSlot);
    mesh.barrier();
    Completion plain = expectSuccess(*node.recvQueue);
    EXPECT_EQ(plain.id, 20u);
    EXPECT_EQ(plain.byteLength, 600u);
    EXPECT_EQ(firstMismatch(user.data(), 600, 3), -1);
    Completion packed = expectSuccess(*node.recvQueue);
    EXPECT_EQ(packed.id, 21u) << "the failed pack must not have used the receive";
    EXPECT_EQ(packed.byteLength, 1000u);
    EXPECT_EQ(firstMismatch(slots, 1000, 7), -1);
    Completion last = expectSuccess(*node.recvQueue);
    EXPECT_EQ(last.id, 22u);
    EXPECT_EQ(last.byteLength, kSlot);
    EXPECT_EQ(firstMismatch(slots + kSlot, kSlot, 11), -1);
    for (size_t i = 2 * kSlot; i < 3 * kSlot; ++i) ASSERT_EQ(slots[i], 0xEE) << "beyond the receives";
    mesh.barrier();
  });
  expectAllPassed(statuses);
}

}  // namespace
}  // namespace ibdt::fabric::testing
