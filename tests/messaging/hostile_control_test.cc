// Hostile control messages: a rogue rank (rogue_peer.h) delivers crafted
// bytes into a real Context's eager receive buffers. Each case asserts the
// exact outcome: the victim's operations with the rogue complete with
// kProtocol (or the documented code) naming the rank and the transfer; its
// traffic with an honest peer delivers every byte meanwhile, no byte lands
// outside a receive buffer (guards), and the victim still closes cleanly
// (hostile_world.h checks those after every case).
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <ostream>
#include <string>

#include "messaging/hostile_world.h"

namespace ibdt::messaging::testing {
namespace {

using datatype::Datatype;
using wire::Kind;

Datatype bytes() { return Datatype::of<uint8_t>(); }

using HostileControl = HostileWorld;

// --- a rogue that follows the protocol is served (the harness is sound) ---

TEST_F(HostileControl, WellFormedEagerFromTheRogueIsDelivered) {
  Request recv = postRecvFromRogue();
  auto payload = pattern(3000, 5);
  rogueSends(rogueEager(payload, 3000));
  RecvInfo info;
  ASSERT_TRUE(victim().wait(recv, &info, Deadline::after(std::chrono::seconds(60))).isOk());
  EXPECT_EQ(info.bytes, 3000);
  EXPECT_TRUE(std::equal(payload.begin(), payload.end(), fromRogue_.data()));
  EXPECT_TRUE(
      std::all_of(fromRogue_.data() + 3000, fromRogue_.data() + kRogueRecvBytes, [](uint8_t b) { return b == 0; }));
  fromRogueWritten_ = true;
}

TEST_F(HostileControl, SignatureMismatchFailsThatReceiveOnly) {
  // The documented outcome of a type mismatch: kInvalidArgument for that
  // receive, nothing delivered; the peer stays trusted.
  // (The signature is compared when the sizes match.)
  constexpr int64_t kBytes = 4000;
  auto payload = pattern(kBytes, 6);
  wire::Envelope envelope = rogueEnvelope(kBytes);
  envelope.signatureHash ^= 1;
  Request recv = postRecvFromRogue(kBytes);
  rogueSends(eagerMessage(envelope, payload));
  Status status = victim().wait(recv, nullptr, Deadline::after(std::chrono::seconds(60)));
  EXPECT_EQ(status.code(), Code::kInvalidArgument) << status.toString();
  EXPECT_NE(status.message().find("rank 2"), std::string_view::npos) << status.toString();
  EXPECT_TRUE(std::all_of(fromRogue_.data(), fromRogue_.data() + kRogueRecvBytes, [](uint8_t b) { return b == 0; }));
  Request next = postRecvFromRogue(kBytes);
  rogueSends(rogueEager(payload, kBytes));
  ASSERT_TRUE(victim().wait(next, nullptr, Deadline::after(std::chrono::seconds(60))).isOk());
  EXPECT_TRUE(std::equal(payload.begin(), payload.end(), fromRogue_.data()));
  fromRogueWritten_ = true;
}

// --- malformed messages ---

TEST_F(HostileControl, UnknownKind) {
  expectRejected({message(static_cast<Kind>(0x7f))}, Code::kProtocol, {"unknown control message kind 127", "rank 2"});
}

TEST_F(HostileControl, KindZero) {
  expectRejected({message(static_cast<Kind>(0)).add(uint64_t{0})}, Code::kProtocol,
                 {"unknown control message kind 0", "rank 2"});
}

TEST_F(HostileControl, EmptyMessage) {
  expectRejected({Crafted()}, Code::kProtocol, {"too short: 0 bytes, need 8", "rank 2"});
}

TEST_F(HostileControl, TruncatedHeader) {
  expectRejected({message(Kind::kEager).chop(3)}, Code::kProtocol, {"too short: 5 bytes, need 8", "rank 2"});
}

// Each kind one byte short of its fixed part.
struct Truncation {
  Kind kind;
  size_t fixedBytes;  // after the header
  const char* name;
};

// Names the case in ctest's listing (the default prints its bytes).
void PrintTo(const Truncation& truncation, std::ostream* out) { *out << truncation.name; }

class TruncatedControl : public HostileControl, public ::testing::WithParamInterface<Truncation> {};

TEST_P(TruncatedControl, OneByteShort) {
  const Truncation& t = GetParam();
  Request recv = postRecvFromRogue();
  std::vector<uint8_t> body(t.fixedBytes, 0x11);
  rogueSends(message(t.kind).add(body).chop(1));
  size_t sent = sizeof(wire::Header) + t.fixedBytes - 1;
  expectRogueFailed(recv, Code::kProtocol,
                    {"rank 2", "too short: " + std::to_string(sent) + " bytes, need " + std::to_string(sent + 1)});
}

INSTANTIATE_TEST_SUITE_P(Kinds, TruncatedControl,
                         ::testing::Values(Truncation{Kind::kEager, sizeof(wire::Envelope), "Envelope"},
                                           Truncation{Kind::kRts, sizeof(wire::Envelope), "RtsEnvelope"},
                                           Truncation{Kind::kRts, sizeof(wire::Envelope) + sizeof(wire::Rts), "Rts"},
                                           Truncation{Kind::kCts, sizeof(wire::Cts), "Cts"},
                                           Truncation{Kind::kPacked, sizeof(wire::Packed), "Packed"},
                                           Truncation{Kind::kFin, sizeof(wire::Fin), "Fin"},
                                           Truncation{Kind::kRelease, sizeof(wire::Release), "Release"},
                                           Truncation{Kind::kPipelined, sizeof(wire::Envelope), "Pipelined"},
                                           Truncation{Kind::kFragment, sizeof(wire::Fragment), "Fragment"}),
                         [](const auto& param) { return std::string(param.param.name); });

TEST_F(HostileControl, OversizedMessage) {
  // Longer than an eager buffer: the fabric refuses it at the victim's
  // receive (local length error, Code::kTruncated), which fails the peer.
  Request recv = postRecvFromRogue();
  std::vector<uint8_t> payload(static_cast<size_t>(options().eagerLimit) + 1, 0x22);
  Crafted big = rogueEager(payload, static_cast<int64_t>(payload.size()));
  (void)rogue().send(kVictim, big);  // the rogue's own completion may fail too
  expectRogueFailed(recv, Code::kTruncated, {"rank 2"});
}

// --- eager length and envelope ---

TEST_F(HostileControl, EagerPayloadShorterThanClaimed) {
  expectRejected({rogueEager(pattern(50, 7), 100)}, Code::kProtocol,
                 {"eager message from rank 2 claims 100 bytes and carries 50"});
}

TEST_F(HostileControl, EagerPayloadLongerThanClaimed) {
  expectRejected({rogueEager(pattern(50, 7), 10)}, Code::kProtocol,
                 {"eager message from rank 2 claims 10 bytes and carries 50"});
}

TEST_F(HostileControl, EagerNegativeBytes) {
  expectRejected({rogueEager({}, -5)}, Code::kProtocol, {"eager message from rank 2 claims -5 bytes"});
}

TEST_F(HostileControl, EagerClaimsAnotherSource) {
  expectRejected({rogueEager(pattern(50, 7), 50, kHonest)}, Code::kProtocol,
                 {"rank 2 sent a message claiming source 1"});
}

TEST_F(HostileControl, EagerNegativeTag) {
  // Sends refuse negative tags; one on the wire would match kAnyTag receives as tag -1.
  auto payload = pattern(50, 7);
  wire::Envelope envelope = rogueEnvelope(50);
  envelope.tag = kAnyTag;
  auto recv = victim().irecv(fromRogue_.data(), kRogueRecvBytes, bytes(), kRogue, kAnyTag);
  ASSERT_TRUE(recv.isOk());
  rogueSends(eagerMessage(envelope, payload));
  expectRogueFailed(*recv, Code::kProtocol, {"rank 2 sent a message with negative tag -1"});
}

// --- RTS ---

// The signature is only compared when the sizes match, which they never do here.
wire::Envelope rtsEnvelope(int64_t bytes) { return wire::Envelope{kRogue, kRogueTag, 0, 0, bytes, 0, 0}; }

TEST_F(HostileControl, RtsWithoutData) {
  expectRejected({message(Kind::kRts).add(rtsEnvelope(0)).add(contiguousRts(1, 0))}, Code::kProtocol,
                 {"RTS from rank 2 with no data"});
}

TEST_F(HostileControl, RtsNegativeBytes) {
  expectRejected({message(Kind::kRts).add(rtsEnvelope(-1)).add(contiguousRts(1, -1))}, Code::kProtocol,
                 {"RTS from rank 2 with no data"});
}

TEST_F(HostileControl, RtsWithGarbageStatistics) {
  // NaN, infinite and negative statistics only steer the choice of scheme.
  Request recv = postRecvFromRogue();
  wire::Rts rts = contiguousRts(1, kRogueRecvBytes);
  rts.senderContiguous = 0;
  rts.forcedScheme = 0xee;
  rts.blockCount = -7;
  rts.meanBlock = std::numeric_limits<double>::quiet_NaN();
  rts.medianBlock = -std::numeric_limits<double>::infinity();
  rts.stddevBlock = std::numeric_limits<double>::infinity();
  auto envelope = rtsEnvelope(1 << 20);
  rogueSends(message(Kind::kRts).add(envelope).add(rts));
  RogueMessage reply = nextFromVictim();
  auto cts = wire::read<wire::Cts>(reply.bytes, sizeof(wire::Header));
  ASSERT_TRUE(cts.isOk());
  EXPECT_EQ(cts->bytes, kRogueRecvBytes);  // truncated to the receive buffer
  // Then the rogue breaks off: a Fin it never had reason to send.
  rogueSends(message(Kind::kFin).add(wire::Fin{999, 0}));
  expectRogueFailed(recv, Code::kProtocol, {"rank 2 finished unknown transfer 999"});
}

TEST_F(HostileControl, RtsClaimingAHugeMessageIsTruncatedToTheBuffer) {
  // 2^62 bytes is a size no sender holds, but not malformed: the receive
  // takes what fits and completes with kTruncated, nothing beyond written.
  Request recv = postRecvFromRogue();
  const int64_t huge = int64_t{1} << 62;
  rogueSends(message(Kind::kRts).add(rtsEnvelope(huge)).add(contiguousRts(5, huge)));
  RogueMessage reply = nextFromVictim();
  auto header = wire::read<wire::Header>(reply.bytes, 0);
  auto cts = wire::read<wire::Cts>(reply.bytes, sizeof(wire::Header));
  ASSERT_TRUE(header.isOk() && header->kind == Kind::kCts && cts.isOk());
  ASSERT_EQ(cts->senderTransfer, 5u);
  ASSERT_EQ(cts->bytes, kRogueRecvBytes);
  ASSERT_GE(cts->remoteLength, static_cast<uint64_t>(kRogueRecvBytes));
  // One segment either way (segments are >= 16 KiB): one write with the immediate.
  auto data = pattern(static_cast<size_t>(kRogueRecvBytes), 8);
  ASSERT_TRUE(rogue().writeWithImm(kVictim, data, cts->remoteAddress, cts->rkey, cts->receiverTransfer).isOk());
  RecvInfo info;
  Status status = victim().wait(recv, &info, Deadline::after(std::chrono::seconds(60)));
  EXPECT_EQ(status.code(), Code::kTruncated) << status.toString();
  EXPECT_EQ(info.bytes, kRogueRecvBytes);
  EXPECT_EQ(info.messageBytes, huge);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), fromRogue_.data()));
  fromRogueWritten_ = true;
}

TEST_F(HostileControl, ImmediateNamingAnotherTransfer) {
  // Data written for a transfer the victim does not have with this peer.
  Request recv = postRecvFromRogue();
  rogueSends(message(Kind::kRts).add(rtsEnvelope(kRogueRecvBytes * 2)).add(contiguousRts(5, kRogueRecvBytes * 2)));
  RogueMessage reply = nextFromVictim();
  auto cts = wire::read<wire::Cts>(reply.bytes, sizeof(wire::Header));
  ASSERT_TRUE(cts.isOk());
  auto data = pattern(static_cast<size_t>(kRogueRecvBytes), 9);
  uint32_t wrong = cts->receiverTransfer + 1000;
  ASSERT_TRUE(rogue().writeWithImm(kVictim, data, cts->remoteAddress, cts->rkey, wrong).isOk());
  expectRogueFailed(recv, Code::kProtocol, {"rank 2 wrote to unknown " + transferName(wrong)});
  // The write itself landed where the victim's reply allowed (the receive
  // buffer, or staging); a failed receive's contents are undefined.
  fromRogueWritten_ = true;
}

// --- CTS ---

TEST_F(HostileControl, CtsForUnknownTransfer) {
  Started started = victimSendsToRogue(kRendezvousBytes, bytes());
  wire::Cts cts = ctsFor(started, wire::ReplyMode::kUnpack);
  cts.senderTransfer += 1000;
  rogueReplies(cts);
  expectRogueFailed(started.request, Code::kProtocol,
                    {"rank 2 sent an invalid reply for " + transferName(cts.senderTransfer)});
}

TEST_F(HostileControl, CtsForFinishedTransfer) {
  Started first = victimSendsToRogue(kRendezvousBytes, bytes());
  wire::Cts takesNothing = ctsFor(first, wire::ReplyMode::kUnpack);
  takesNothing.bytes = 0;
  rogueReplies(takesNothing);
  ASSERT_TRUE(victim().wait(first.request, nullptr, Deadline::after(std::chrono::seconds(60))).isOk());
  Started second = victimSendsToRogue(kRendezvousBytes, bytes());
  rogueReplies(takesNothing);  // again, for the finished transfer
  expectRogueFailed(second.request, Code::kProtocol,
                    {"rank 2 sent an invalid reply for " + transferName(first.rts.senderTransfer)});
}

TEST_F(HostileControl, CtsAcceptsMoreThanSent) {
  expectReplyRejected(
      wire::ReplyMode::kUnpack, [](wire::Cts& cts) { ++cts.bytes; }, Code::kProtocol, "invalid reply");
}

TEST_F(HostileControl, CtsNegativeBytes) {
  expectReplyRejected(
      wire::ReplyMode::kUnpack, [](wire::Cts& cts) { cts.bytes = -1; }, Code::kProtocol, "invalid reply");
}

TEST_F(HostileControl, CtsUnknownMode) {
  expectReplyRejected(
      static_cast<wire::ReplyMode>(9), [](wire::Cts&) {}, Code::kProtocol, "invalid reply");
}

TEST_F(HostileControl, CtsStagingTooSmall) {
  expectReplyRejected(
      wire::ReplyMode::kUnpack, [](wire::Cts& cts) { cts.remoteLength = kRendezvousBytes - 1; }, Code::kProtocol,
      "offered 65535 bytes");
}

TEST_F(HostileControl, CtsZeroSegmentSize) {
  expectReplyRejected(
      wire::ReplyMode::kUnpack, [](wire::Cts& cts) { cts.segmentSize = 0; }, Code::kProtocol, "0 segments of 0 bytes");
}

TEST_F(HostileControl, CtsNegativeSegmentSize) {
  expectReplyRejected(
      wire::ReplyMode::kUnpack, [](wire::Cts& cts) { cts.segmentSize = -4096; }, Code::kProtocol,
      "segments of -4096 bytes");
}

TEST_F(HostileControl, CtsRingWhoseSizeOverflows) {
  // ringSegments x segmentSize beyond 64 bits, however long the range.
  expectReplyRejected(
      wire::ReplyMode::kUnpack,
      [](wire::Cts& cts) {
        cts.ringSegments = 4;
        cts.segmentSize = std::numeric_limits<int64_t>::max();
        cts.remoteLength = std::numeric_limits<uint64_t>::max();
      },
      Code::kProtocol, "4 segments of 9223372036854775807 bytes");
}

TEST_F(HostileControl, CtsAbsurdRingSegments) {
  expectReplyRejected(
      wire::ReplyMode::kUnpack,
      [](wire::Cts& cts) {
        cts.ringSegments = std::numeric_limits<uint32_t>::max();
        cts.segmentSize = 4096;
      },
      Code::kProtocol, "4294967295 segments of 4096 bytes");
}

TEST_F(HostileControl, CtsZeroCopyRangeShorterThanTheMessage) {
  expectReplyRejected(
      wire::ReplyMode::kZeroCopy, [](wire::Cts& cts) { cts.remoteLength = 16; }, Code::kProtocol, "offered 16 bytes");
}

TEST_F(HostileControl, CtsRangeOutsideTheRoguesRegion) {
  // A consistent claim the rkey does not cover: the fabric refuses the
  // write (remote access error), which fails the peer.
  expectReplyRejected(
      wire::ReplyMode::kZeroCopy, [this](wire::Cts& cts) { cts.remoteAddress += rogue().memory().length() - 100; },
      Code::kRemoteAccess, "rendezvous write");
}

TEST_F(HostileControl, CtsGarbageRkey) {
  expectReplyRejected(
      wire::ReplyMode::kUnpack, [](wire::Cts& cts) { cts.rkey ^= 0x5a5a5a5a5aull; }, Code::kRemoteAccess,
      "rendezvous write");
}

}  // namespace
}  // namespace ibdt::messaging::testing
