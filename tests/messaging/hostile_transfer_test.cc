// Hostile control messages inside a rendezvous: receiver layouts (Multi-W),
// staging-ring releases, P-RRS offers and finishes, credits and close. The
// rogue first plays each protocol correctly (the victim delivers every
// byte), then breaks it; see hostile_control_test.cc for the frame.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "messaging/hostile_world.h"

namespace ibdt::messaging::testing {
namespace {

using datatype::Datatype;
using wire::Kind;

constexpr auto kWait = std::chrono::seconds(60);

Datatype committed(Result<Datatype> type) {
  EXPECT_TRUE(type.isOk() && type->commit().isOk());
  return *type;
}

// The victim's noncontiguous send: 1024 blocks of 32 bytes, stride 64 (32 KiB).
Datatype senderType() { return committed(Datatype::vector(1024, 32, 64, Datatype::of<uint8_t>())); }
// The layout the rogue claims for its receive: 512 blocks of 64, stride 128.
Datatype claimedType() { return committed(Datatype::vector(512, 64, 128, Datatype::of<uint8_t>())); }
constexpr int64_t kStridedBytes = 32 << 10;

class HostileTransfer : public HostileWorld {
 protected:
  // A zero-copy reply with the receiver's layout, as an honest receiver of
  // claimedType() at the rogue's memory would send it.
  wire::Cts layoutReply(const Started& started) {
    wire::Cts cts = ctsFor(started, wire::ReplyMode::kZeroCopy);
    cts.receiverContiguous = 0;
    cts.typeId = 4242;
    cts.typeVersion = 1;
    cts.count = 1;
    cts.baseAddress = cts.remoteAddress;
    return cts;
  }
  std::vector<uint8_t> layoutBytes() {
    auto bytes = datatype::serialize(claimedType());
    EXPECT_TRUE(bytes.isOk());
    return bytes.isOk() ? *bytes : std::vector<uint8_t>();
  }
  void sendWithLayout(wire::Cts cts, std::span<const uint8_t> layout) {
    cts.hasLayout = 1;
    cts.layoutBytes = static_cast<uint32_t>(layout.size());
    rogueReplies(cts, layout);
  }
  // The victim's noncontiguous send fails with `code`, naming rank 2, the
  // transfer and every needle, after a layout reply that `change` altered
  // (the reply and its layout, whose announced length is set before).
  template <typename Change>
  void expectLayoutRejected(Change change, Code code, std::vector<std::string> needles) {
    Started started = victimSendsToRogue(1, senderType());
    wire::Cts cts = layoutReply(started);
    std::vector<uint8_t> layout = layoutBytes();
    cts.hasLayout = 1;
    cts.layoutBytes = static_cast<uint32_t>(layout.size());
    change(cts, layout);
    rogueReplies(cts, layout);
    needles.push_back("rank 2");
    needles.push_back(transferName(started.rts.senderTransfer));
    expectRogueFailed(started.request, code, needles);
  }
  const uint8_t* rogueMemory() { return static_cast<const uint8_t*>(rogue().memory().address()); }
  // The victim's packed byte `p` of a contiguous send.
  bool rogueHolds(size_t at, size_t first, size_t count) {
    return std::memcmp(rogueMemory() + at, toRogue_.data() + first, count) == 0;
  }
  void expectImmediate(uint32_t imm) {
    RogueMessage got = nextFromVictim();
    EXPECT_TRUE(got.writeWithImm);
    EXPECT_EQ(got.immData, imm);
  }
};

// --- receiver layouts (Multi-W) ---

TEST_F(HostileTransfer, WellFormedLayoutIsWrittenThrough) {
  Started started = victimSendsToRogue(1, senderType());
  wire::Cts cts = layoutReply(started);
  sendWithLayout(cts, layoutBytes());
  expectImmediate(cts.receiverTransfer);
  ASSERT_TRUE(victim().wait(started.request, nullptr, Deadline::after(kWait)).isOk());
  // Packed byte p: sender block p / 32 at stride 64; receiver block p / 64 at stride 128.
  for (int64_t p = 0; p < kStridedBytes; ++p) {
    uint8_t sent = toRogue_[static_cast<size_t>(p / 32 * 64 + p % 32)];
    ASSERT_EQ(rogueMemory()[p / 64 * 128 + p % 64], sent) << "packed byte " << p;
  }
}

TEST_F(HostileTransfer, GarbageLayout) {
  expectLayoutRejected(
      [](wire::Cts& cts, std::vector<uint8_t>& layout) {
        layout.assign(64, 0xee);
        cts.layoutBytes = 64;
      },
      Code::kProtocol, {"rank 2 sent an unusable layout (count 1)", "datatype wire format"});
}

TEST_F(HostileTransfer, LayoutShorterThanAnnounced) {
  expectLayoutRejected([](wire::Cts& cts, std::vector<uint8_t>&) { cts.layoutBytes += 100; }, Code::kProtocol,
                       {"CTS from rank 2 for transfer", "announces a"});
}

TEST_F(HostileTransfer, LayoutWithNegativeCount) {
  expectLayoutRejected([](wire::Cts& cts, std::vector<uint8_t>&) { cts.count = -1; }, Code::kProtocol,
                       {"rank 2 sent an unusable layout (count -1)", "negative count"});
}

TEST_F(HostileTransfer, LayoutWithHugeCount) {
  expectLayoutRejected([](wire::Cts& cts, std::vector<uint8_t>&) { cts.count = int64_t{1} << 60; }, Code::kProtocol,
                       {"rank 2 sent an unusable layout (count 1152921504606846976)", "64-bit"});
}

TEST_F(HostileTransfer, LayoutHoldingLessThanAccepted) {
  expectLayoutRejected([](wire::Cts& cts, std::vector<uint8_t>&) { cts.count = 0; }, Code::kProtocol,
                       {"rank 2's layout holds 0 bytes, it accepted 32768"});
}

TEST_F(HostileTransfer, LayoutNeverSent) {
  Started started = victimSendsToRogue(1, senderType());
  rogueReplies(layoutReply(started));  // no layout, none cached
  expectRogueFailed(
      started.request, Code::kProtocol,
      {"rank 2 refers to layout (4242, 1) it never sent, for " + transferName(started.rts.senderTransfer)});
}

TEST_F(HostileTransfer, LayoutPlacingBlocksOutsideTheRegion) {
  // The rkey bounds every write: the fabric refuses, the peer fails.
  expectLayoutRejected([this](wire::Cts& cts, std::vector<uint8_t>&) { cts.baseAddress += rogue().memory().length(); },
                       Code::kRemoteAccess, {"rendezvous write of transfer"});
}

TEST_F(HostileTransfer, LayoutWrappingAroundTheAddressSpace) {
  expectLayoutRejected(
      [](wire::Cts& cts, std::vector<uint8_t>&) { cts.baseAddress = std::numeric_limits<uint64_t>::max() - 100; },
      Code::kRemoteAccess, {"rendezvous write of transfer"});
}

// --- staging ring releases ---

class HostileRing : public HostileTransfer {
 protected:
  // The victim's contiguous send into a ring of 2 x 4 KiB at the rogue:
  // it writes two segments, then waits for a Release.
  void SetUp() override {
    HostileTransfer::SetUp();
    if (HasFatalFailure()) return;
    started_ = victimSendsToRogue(kRendezvousBytes, Datatype::of<uint8_t>());
    wire::Cts cts = ctsFor(started_, wire::ReplyMode::kUnpack);
    cts.ringSegments = 2;
    cts.remoteLength = 2 * 4096;
    rogueReplies(cts);
    expectImmediate(cts.receiverTransfer);
    expectImmediate(cts.receiverTransfer);
    EXPECT_TRUE(rogueHolds(0, 0, 8192));
  }
  // Frees ring slots, and returns the two credits the victim's last two
  // immediates took (it has 8 for the rogue).
  void release(uint64_t segments) {
    rogueSends(message(Kind::kRelease, 2).add(wire::Release{started_.rts.senderTransfer, 0, segments}));
  }
  std::string transfer() const { return transferName(started_.rts.senderTransfer); }
  Started started_;
};

TEST_F(HostileRing, ReleasesAreFollowed) {
  for (uint64_t done = 2; done < 16; done += 2) {
    release(done);
    expectImmediate(4242);
    expectImmediate(4242);
    ASSERT_TRUE(rogueHolds(0, done * 4096, 8192)) << "segments " << done << " and " << done + 1;
  }
  ASSERT_TRUE(victim().wait(started_.request, nullptr, Deadline::after(kWait)).isOk());
}

TEST_F(HostileRing, MoreSegmentsThanExist) {
  release(17);
  expectRogueFailed(started_.request, Code::kProtocol,
                    {"rank 2 released 17 of 16 segments (0 already) of " + transfer()});
}

TEST_F(HostileRing, ReleaseGoingBackwards) {
  release(2);
  expectImmediate(4242);
  expectImmediate(4242);
  EXPECT_TRUE(rogueHolds(0, 8192, 8192));
  release(1);
  expectRogueFailed(started_.request, Code::kProtocol,
                    {"rank 2 released 1 of 16 segments (2 already) of " + transfer()});
}

TEST_F(HostileRing, ReleaseForUnknownTransfer) {
  rogueSends(message(Kind::kRelease).add(wire::Release{777, 0, 1}));
  expectRogueFailed(started_.request, Code::kProtocol, {"rank 2 released staging of unknown transfer 777"});
}

// --- P-RRS: the rogue offers packed data, the victim reads it ---

class HostilePRrs : public HostileTransfer {
 protected:
  // The rogue asks for P-RRS (its RTS forces it); the victim's reply names
  // the receive buffer's transfer.
  void SetUp() override {
    HostileTransfer::SetUp();
    if (HasFatalFailure()) return;
    recv_ = postRecvFromRogue();
    wire::Cts cts = rogueAsks(contiguousRts(31, kRogueRecvBytes, Scheme::kPRrs), kRogueRecvBytes);
    ASSERT_EQ(cts.mode, wire::ReplyMode::kZeroCopy);
    ASSERT_EQ(cts.bytes, kRogueRecvBytes);
    receiverTransfer_ = cts.receiverTransfer;
    data_ = pattern(static_cast<size_t>(kRogueRecvBytes), 12);
    std::memcpy(rogue().memory().address(), data_.data(), data_.size());
  }
  void offer(uint64_t length, uint64_t rkey) {
    auto address = reinterpret_cast<uint64_t>(rogue().memory().address());
    rogueSends(message(Kind::kPacked).add(wire::Packed{receiverTransfer_, 0, address, length, rkey}));
  }
  Request recv_;
  uint32_t receiverTransfer_ = 0;
  std::vector<uint8_t> data_;
};

TEST_F(HostilePRrs, WellFormedOfferIsRead) {
  offer(kRogueRecvBytes, rogue().memory().rkey());
  ASSERT_TRUE(victim().wait(recv_, nullptr, Deadline::after(kWait)).isOk());
  EXPECT_TRUE(std::equal(data_.begin(), data_.end(), fromRogue_.data()));
  fromRogueWritten_ = true;
  RogueMessage fin = nextFromVictim();
  auto header = wire::read<wire::Header>(fin.bytes, 0);
  auto fields = wire::read<wire::Fin>(fin.bytes, sizeof(wire::Header));
  ASSERT_TRUE(header.isOk() && header->kind == Kind::kFin && fields.isOk());
  EXPECT_EQ(fields->senderTransfer, 31u);
}

TEST_F(HostilePRrs, OfferShorterThanTheMessage) {
  offer(kRogueRecvBytes - 1, rogue().memory().rkey());
  expectRogueFailed(recv_, Code::kProtocol,
                    {"rank 2 offered 8191 packed bytes for " + transferName(receiverTransfer_) + " of 8192"});
}

TEST_F(HostilePRrs, OfferWithGarbageRkey) {
  offer(kRogueRecvBytes, rogue().memory().rkey() ^ 0x5a5a5a5a5aull);
  expectRogueFailed(recv_, Code::kRemoteAccess, {"P-RRS read of " + transferName(receiverTransfer_), "rank 2"});
}

TEST_F(HostilePRrs, OfferedTwice) {
  // Both arrive before the victim looks (it does not run meanwhile), so the
  // second finds the transfer reading.
  auto pump = std::exchange(rogue().pump, [] {});
  offer(kRogueRecvBytes, rogue().memory().rkey());
  offer(kRogueRecvBytes, rogue().memory().rkey());
  rogue().pump = pump;
  expectRogueFailed(recv_, Code::kProtocol,
                    {"rank 2 offered packed data for unknown " + transferName(receiverTransfer_)});
  // The first offer's read was under way: a failed receive's buffer holds
  // what arrived before the failure (the guards are still checked).
  fromRogueWritten_ = true;
}

TEST_F(HostileTransfer, PackedForUnknownTransfer) {
  expectRejected({message(Kind::kPacked).add(wire::Packed{4242, 0, 0, 100, 0})}, Code::kProtocol,
                 {"rank 2 offered packed data for unknown transfer 4242"});
}

TEST_F(HostileTransfer, FinForUnknownTransfer) {
  expectRejected({message(Kind::kFin).add(wire::Fin{4242, 0})}, Code::kProtocol,
                 {"rank 2 finished unknown transfer 4242"});
}

TEST_F(HostileTransfer, FinForATransferNotReading) {
  Started started = victimSendsToRogue(kRendezvousBytes, Datatype::of<uint8_t>());
  rogueSends(message(Kind::kFin).add(wire::Fin{started.rts.senderTransfer, 0}));
  expectRogueFailed(started.request, Code::kProtocol,
                    {"rank 2 finished unknown " + transferName(started.rts.senderTransfer)});
}

// --- credits ---

TEST_F(HostileTransfer, CreditsNeverTaken) {
  expectRejected({message(Kind::kCredit, 1)}, Code::kProtocol, {"rank 2 returned 1 credits, 8 of 8 are already free"});
}

TEST_F(HostileTransfer, CreditsThatWouldOverflow) {
  expectRejected({message(Kind::kEager, std::numeric_limits<uint32_t>::max())}, Code::kProtocol,
                 {"rank 2 returned 4294967295 credits"});
}

TEST_F(HostileTransfer, CreditReturnedTwice) {
  // The victim's RTS took one credit: one may come back, not two.
  Started started = victimSendsToRogue(kRendezvousBytes, Datatype::of<uint8_t>());
  rogueSends(message(Kind::kCredit, 1));
  rogueSends(message(Kind::kCredit, 1));
  expectRogueFailed(started.request, Code::kProtocol, {"rank 2 returned 1 credits, 8 of 8 are already free"});
}

// --- close ---

TEST_F(HostileTransfer, TrafficAfterClose) {
  expectRejected({message(Kind::kClose), rogueEager(pattern(100, 13), 100)}, Code::kProtocol,
                 {"rank 2 sent more after it closed"});
}

TEST_F(HostileTransfer, CloseTwice) {
  expectRejected({message(Kind::kClose), message(Kind::kClose)}, Code::kProtocol, {"rank 2 sent more after it closed"});
}

}  // namespace
}  // namespace ibdt::messaging::testing
