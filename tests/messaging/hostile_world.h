// tests/messaging/hostile_world.h — a victim Context, an honest peer and a
// rogue peer (rogue_peer.h) over the real shm provider, driven by the test
// thread. The victim and the honest peer exchange eager and rendezvous
// messages both ways throughout, so that every case also shows that the
// victim's traffic with other peers delivers every byte while one peer
// misbehaves; every receive buffer has guard bytes on both sides.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ibdt/messaging.h"
#include "messaging/rogue_peer.h"
#include "support/pattern.h"
#include "transport/messaging/wire.h"

namespace ibdt::messaging::testing {

inline constexpr int kVictim = 0;
inline constexpr int kHonest = 1;
inline constexpr int kRogue = 2;
inline constexpr int32_t kRogueTag = 7;
inline constexpr int64_t kRogueRecvBytes = 8192;       // the victim's receive from the rogue
inline constexpr int64_t kRendezvousBytes = 64 << 10;  // the victim's rendezvous send to the rogue

inline std::string transferName(uint32_t id) { return "transfer " + std::to_string(id); }

// Bytes with kGuardBytes of a known value on each side.
class Guarded {
 public:
  static constexpr size_t kGuardBytes = 256;
  static constexpr uint8_t kGuard = 0xA5;
  explicit Guarded(size_t bytes, uint8_t fill = 0);
  uint8_t* data() { return storage_.data() + kGuardBytes; }
  const uint8_t* data() const { return storage_.data() + kGuardBytes; }
  size_t size() const { return storage_.size() - 2 * kGuardBytes; }
  // Index of the first guard byte that changed, -1 if none did.
  long firstDamagedGuard() const;

 private:
  std::vector<uint8_t> storage_;
};

using ibdt::test::pattern;  // tests/support/pattern.h

class HostileWorld : public ::testing::Test {
 protected:
  HostileWorld();
  ~HostileWorld() override;
  void SetUp() override;
  void TearDown() override;

  Context& victim() { return *victim_; }
  RoguePeer& rogue() { return *rogue_; }
  const Options& options() const { return options_; }

  // The victim's receive of up to `bytes` (<= kRogueRecvBytes) from the
  // rogue (tag kRogueTag) into fromRogue_.
  Request postRecvFromRogue(int64_t bytes = kRogueRecvBytes);
  // The victim starts a rendezvous send of `count` x `type` from toRogue_ to
  // the rogue; returns the request and the RTS that arrived at the rogue.
  struct Started {
    Request request;
    wire::Envelope envelope;
    wire::Rts rts;
  };
  Started victimSendsToRogue(int64_t count, const datatype::Datatype& type);
  // The next message from the victim, credit-only ones skipped.
  RogueMessage nextFromVictim();
  // The rogue sends `rts` for an honest envelope of `bytes` x uint8 and
  // returns the victim's reply (a default Cts, with a failure, if none came).
  wire::Cts rogueAsks(const wire::Rts& rts, int64_t bytes);
  void rogueSends(std::span<const uint8_t> bytes);

  // `request` completes with `code`, its message holds every needle, and the
  // victim now refuses new sends to the rogue with the same error.
  void expectRogueFailed(Request& request, Code code, const std::vector<std::string>& needles);

  // The victim's receive from the rogue fails with `code` and `needles`
  // (as expectRogueFailed) after the rogue sent `messages`.
  void expectRejected(std::initializer_list<Crafted> messages, Code code, const std::vector<std::string>& needles) {
    Request recv = postRecvFromRogue();
    for (const Crafted& crafted : messages) rogueSends(crafted);
    expectRogueFailed(recv, code, needles);
  }

  // A reply to `started` the rogue crafts from an honest-looking base: the
  // whole message into the rogue's memory, segments of 4 KiB, no ring.
  wire::Cts ctsFor(const Started& started, wire::ReplyMode mode);
  void rogueReplies(const wire::Cts& cts, std::span<const uint8_t> layout = {});
  // The victim's send of kRendezvousBytes to the rogue fails with `code`
  // (naming the rank and the transfer, and `needle`) after the rogue
  // replied with the honest base changed by `change`.
  template <typename Change>
  void expectReplyRejected(wire::ReplyMode mode, Change change, Code code, std::string_view needle) {
    Started started = victimSendsToRogue(kRendezvousBytes, datatype::Datatype::of<uint8_t>());
    wire::Cts cts = ctsFor(started, mode);
    change(cts);
    rogueReplies(cts);
    expectRogueFailed(started.request, code, {std::string(needle), "rank 2", transferName(started.rts.senderTransfer)});
  }

  Options options_;
  Guarded fromRogue_{static_cast<size_t>(kRogueRecvBytes)};
  std::vector<uint8_t> toRogue_ = pattern(1 << 20, 99);
  bool rogueFailed_ = false;
  bool fromRogueWritten_ = false;  // a case that lets the rogue deliver checks fromRogue_ itself

 private:
  void startHonestTraffic();
  void finishHonestTraffic();
  void closeAll();

  std::vector<std::unique_ptr<fabric::Domain>> domains_;
  std::unique_ptr<RoguePeer> rogue_;
  std::unique_ptr<Context> victim_;
  std::unique_ptr<Context> honest_;
  struct Exchange;  // the victim <-> honest traffic
  std::unique_ptr<Exchange> honestTraffic_;
};

// Header (+ fields) of a control message, credits returned: none.
inline Crafted message(wire::Kind kind, uint32_t credits = 0) { return Crafted().add(wire::Header{kind, 0, {}, credits}); }

// The envelope of an honest eager send of `bytes` x uint8 from the rogue (tag kRogueTag).
wire::Envelope rogueEnvelope(int64_t bytes);
inline Crafted eagerMessage(const wire::Envelope& envelope, std::span<const uint8_t> payload) {
  return message(wire::Kind::kEager).add(envelope).add(payload);
}
// The fields of an honest RTS for one contiguous block of `bytes`, asking
// for `forced` (kAuto: the victim chooses).
wire::Rts contiguousRts(uint32_t transfer, int64_t bytes, Scheme forced = Scheme::kAuto);
// An eager message from the rogue of `payload` bytes of uint8, claiming
// `claimedBytes` from `claimedSource`.
Crafted rogueEager(std::span<const uint8_t> payload, int64_t claimedBytes, int32_t claimedSource = kRogue);

}  // namespace ibdt::messaging::testing
