// Hostile pipelined eager messages (first fragment + fragments back to
// back) and a Close while the rogue still owes part of a message or a
// transfer; see hostile_control_test.cc for the frame.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "messaging/hostile_world.h"

namespace ibdt::messaging::testing {
namespace {

using datatype::Datatype;
using wire::Kind;

constexpr auto kWait = std::chrono::seconds(60);

// The first fragment of a pipelined message of `total` bytes.
Crafted pipelinedStart(int64_t total, std::span<const uint8_t> first) {
  return message(Kind::kPipelined).add(rogueEnvelope(total)).add(first);
}

Crafted fragment(int64_t offset, std::span<const uint8_t> payload) {
  return message(Kind::kFragment).add(wire::Fragment{offset}).add(payload);
}

class HostilePipelined : public HostileWorld {
 protected:
  // Sends `data` as a pipelined message cut at `cuts` (offsets, ascending;
  // no fragment above the eager limit, 4 KiB).
  void sendPipelined(const std::vector<uint8_t>& data, std::vector<size_t> cuts) {
    cuts.push_back(data.size());
    std::span<const uint8_t> all(data);
    rogueSends(pipelinedStart(static_cast<int64_t>(data.size()), all.first(cuts[0])));
    for (size_t i = 1; i < cuts.size(); ++i) {
      rogueSends(fragment(static_cast<int64_t>(cuts[i - 1]), all.subspan(cuts[i - 1], cuts[i] - cuts[i - 1])));
    }
  }
  bool received(const std::vector<uint8_t>& data) { return std::equal(data.begin(), data.end(), fromRogue_.data()); }
};

// --- a well-formed pipelined message is delivered ---

TEST_F(HostilePipelined, WellFormedIsDelivered) {
  Request recv = postRecvFromRogue();
  auto data = pattern(static_cast<size_t>(kRogueRecvBytes), 20);
  sendPipelined(data, {3000, 6000});
  RecvInfo info;
  ASSERT_TRUE(victim().wait(recv, &info, Deadline::after(kWait)).isOk());
  EXPECT_EQ(info.bytes, kRogueRecvBytes);
  EXPECT_EQ(info.scheme, Scheme::kPipelined);
  EXPECT_TRUE(received(data));
  fromRogueWritten_ = true;
}

TEST_F(HostilePipelined, UnexpectedIsTakenOverByALaterReceive) {
  auto data = pattern(static_cast<size_t>(kRogueRecvBytes), 21);
  std::span<const uint8_t> all(data);
  rogueSends(pipelinedStart(kRogueRecvBytes, all.first(4000)));
  rogueSends(fragment(4000, all.subspan(4000, 2000)));
  Request recv = postRecvFromRogue();  // takes the first 6000 bytes over
  rogueSends(fragment(6000, all.subspan(6000)));
  ASSERT_TRUE(victim().wait(recv, nullptr, Deadline::after(kWait)).isOk());
  EXPECT_TRUE(received(data));
  fromRogueWritten_ = true;
}

TEST_F(HostilePipelined, LongerThanTheReceiveIsTruncated) {
  // The documented outcome: the bytes that fit, kTruncated, nothing beyond.
  Request recv = postRecvFromRogue();
  auto data = pattern(10000, 22);
  sendPipelined(data, {4000, 8000});
  RecvInfo info;
  Status status = victim().wait(recv, &info, Deadline::after(kWait));
  EXPECT_EQ(status.code(), Code::kTruncated) << status.toString();
  EXPECT_EQ(info.bytes, kRogueRecvBytes);
  EXPECT_EQ(info.messageBytes, 10000);
  EXPECT_TRUE(std::equal(data.begin(), data.begin() + kRogueRecvBytes, fromRogue_.data()));
  fromRogueWritten_ = true;
}

TEST_F(HostilePipelined, SignatureMismatchFailsThatReceiveOnly) {
  Request recv = postRecvFromRogue();
  auto data = pattern(static_cast<size_t>(kRogueRecvBytes), 23);
  wire::Envelope envelope = rogueEnvelope(kRogueRecvBytes);
  envelope.signatureElements += 1;
  std::span<const uint8_t> all(data);
  rogueSends(message(Kind::kPipelined).add(envelope).add(all.first(3000)));
  rogueSends(fragment(3000, all.subspan(3000, 3000)));  // dropped as they arrive
  rogueSends(fragment(6000, all.subspan(6000)));
  Status status = victim().wait(recv, nullptr, Deadline::after(kWait));
  EXPECT_EQ(status.code(), Code::kInvalidArgument) << status.toString();
  EXPECT_TRUE(std::all_of(fromRogue_.data(), fromRogue_.data() + kRogueRecvBytes, [](uint8_t b) { return b == 0; }));
  // The peer is still trusted: its next message is delivered.
  Request next = postRecvFromRogue();
  sendPipelined(data, {3000, 6000});
  ASSERT_TRUE(victim().wait(next, nullptr, Deadline::after(kWait)).isOk());
  EXPECT_TRUE(received(data));
  fromRogueWritten_ = true;
}

// --- malformed ---

TEST_F(HostilePipelined, NoLongerThanItsFirstFragment) {
  expectRejected({pipelinedStart(3000, pattern(3000, 24))}, Code::kProtocol,
                 {"pipelined message from rank 2 claims 3000 bytes and starts with 3000"});
}

TEST_F(HostilePipelined, EmptyFirstFragment) {
  expectRejected({pipelinedStart(8000, {})}, Code::kProtocol,
                 {"pipelined message from rank 2 claims 8000 bytes and starts with 0"});
}

TEST_F(HostilePipelined, NegativeBytes) {
  Request recv = postRecvFromRogue();
  wire::Envelope envelope = rogueEnvelope(100);
  envelope.bytes = -1;
  rogueSends(message(Kind::kPipelined).add(envelope).add(pattern(100, 24)));
  expectRogueFailed(recv, Code::kProtocol, {"pipelined message from rank 2 claims -1 bytes"});
}

TEST_F(HostilePipelined, FragmentOfNoMessage) {
  expectRejected({fragment(0, pattern(100, 25))}, Code::kProtocol,
                 {"rank 2 sent a 100-byte fragment at byte 0 of no message"});
}

TEST_F(HostilePipelined, FragmentAtTheWrongOffset) {
  expectRejected({pipelinedStart(kRogueRecvBytes, pattern(3000, 26)), fragment(2999, pattern(3000, 27))},
                 Code::kProtocol,
                 {"rank 2 sent a 3000-byte fragment at byte 2999 of a 8192-byte message at byte 3000"});
  fromRogueWritten_ = true;  // the first fragment was unpacked
}

TEST_F(HostilePipelined, FragmentBeyondTheMessage) {
  expectRejected({pipelinedStart(5000, pattern(3000, 26)), fragment(3000, pattern(3000, 27))}, Code::kProtocol,
                 {"rank 2 sent a 3000-byte fragment at byte 3000 of a 5000-byte message at byte 3000"});
  // The first 3000 bytes were unpacked before the lie: a failed receive's
  // contents are undefined, its guards are checked.
  fromRogueWritten_ = true;
}

TEST_F(HostilePipelined, EmptyFragment) {
  expectRejected({pipelinedStart(5000, pattern(3000, 26)), fragment(3000, {})}, Code::kProtocol,
                 {"rank 2 sent a 0-byte fragment at byte 3000"});
  fromRogueWritten_ = true;
}

TEST_F(HostilePipelined, MessageStartedInsideAnother) {
  expectRejected({pipelinedStart(kRogueRecvBytes, pattern(3000, 28)), rogueEager(pattern(100, 29), 100)},
                 Code::kProtocol, {"rank 2 started a message at byte 3000 of its 8192-byte pipelined message"});
  fromRogueWritten_ = true;
}

// --- Close while something is owed ---

TEST_F(HostilePipelined, CloseInTheMiddleOfAMessage) {
  expectRejected({pipelinedStart(kRogueRecvBytes, pattern(3000, 30)), message(Kind::kClose)}, Code::kProtocol,
                 {"rank 2 closed at byte 3000 of its 8192-byte pipelined message"});
  fromRogueWritten_ = true;
}

TEST_F(HostilePipelined, CloseBeforeFinishingATransferToTheVictim) {
  Request recv = postRecvFromRogue();
  wire::Cts cts = rogueAsks(contiguousRts(3, kRogueRecvBytes), kRogueRecvBytes);
  ASSERT_FALSE(HasFailure());
  rogueSends(message(Kind::kClose));
  expectRogueFailed(recv, Code::kProtocol,
                    {"rank 2 closed before finishing " + transferName(cts.receiverTransfer) + " to us"});
}

TEST_F(HostilePipelined, CloseWhileTheVictimWritesToIt) {
  Started started = victimSendsToRogue(kRendezvousBytes, Datatype::of<uint8_t>());
  wire::Cts cts = ctsFor(started, wire::ReplyMode::kUnpack);
  cts.ringSegments = 2;  // two segments, then the victim waits for a Release
  cts.remoteLength = 2 * 4096;
  rogueReplies(cts);
  rogueSends(message(Kind::kClose));
  expectRogueFailed(started.request, Code::kProtocol,
                    {"rank 2 closed before finishing " + transferName(started.rts.senderTransfer) + " from us"});
}

}  // namespace
}  // namespace ibdt::messaging::testing
