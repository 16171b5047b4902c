// tests/messaging/lazy_hostile_world.h — a victim Context that connects on
// demand, two honest ranks and a rogue (RoguePeer::createLazy) over the real
// shm provider, driven by the test thread; for hostile_connect_test.cc.
//
// The rogue sends crafted connection datagrams to the victim's listener.
// TearDown then checks that the victim made no connection and sent no
// answer for them and did not fail the rogue (unless the case says so),
// and that the late rank, which first contacts the victim only now,
// connects and exchanges an eager and a rendezvous message each way with
// every byte checked.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <vector>

#include "ibdt/messaging.h"
#include "messaging/hostile_world.h"
#include "transport/messaging/connection.h"

namespace ibdt::messaging::testing {

// kRogue (2) is hostile_world.h's, so its crafted eager envelopes fit.
inline constexpr int kEarly = 0;   // honest; in some cases talking to the victim during the attack
inline constexpr int kTarget = 1;  // the victim; above kEarly, so it accepts kEarly's crossed requests
inline constexpr int kLate = 3;    // honest; first contacts the victim after the attack
inline constexpr int kLazyRanks = 4;
inline constexpr uint64_t kRogueToken = 0x5eed;  // the rogue's link token in its requests

// An eager and a rendezvous message each way between the victim and an
// honest rank; every byte and the guards around each receive are checked.
class Traffic {
 public:
  Traffic(Context& victim, Context& honest, int honestRank);
  ~Traffic();
  void send();     // both sides post their sends
  void receive();  // both sides post their receives
  // Drives `pump` until every request completed, then checks the bytes.
  void finish(const std::function<void()>& pump);

 private:
  struct Message;
  std::vector<std::unique_ptr<Message>> messages_;
};

class LazyHostileWorld : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  Context& early() { return *contexts_[kEarly]; }
  Context& target() { return *contexts_[kTarget]; }
  Context& late() { return *contexts_[kLate]; }
  RoguePeer& rogue() { return *rogue_; }
  void pumpAll();

  // A datagram from the rogue, in the victim's job, with the rogue's token.
  std::vector<uint8_t> datagram(connection::Kind kind, int32_t from, std::span<const uint8_t> address,
                                int32_t to = kTarget, uint64_t echo = 0) const {
    return connection::encode({kind, from, to, rogue_->job(), kRogueToken, echo, address});
  }
  std::vector<uint8_t> request(int32_t from, std::span<const uint8_t> address) const {
    return datagram(connection::Kind::kRequest, from, address);
  }
  // Puts `bytes` into the victim's inbox, waiting (victim driven) while it is
  // full; sealed with the job's key as a member of the job would, or as they are.
  void toTarget(std::span<const uint8_t> bytes, bool sealed = true);
  void toTargetAll(const std::vector<std::vector<uint8_t>>& datagrams) {
    for (const auto& bytes : datagrams) toTarget(bytes);
  }

  // The early rank's traffic: sends posted and the connection up, each
  // side holding the other's messages unmatched (in flight).
  void startEarlyInFlight();
  void finishEarly();
  void startLate();

  // Addresses no provider takes: empty, short, long, or with its first
  // bytes (shm: the magic) changed.
  std::vector<std::vector<uint8_t>> badAddresses() const;

  Options options_;
  std::vector<uint8_t> rogueAddress_;  // the rogue's endpoint toward the victim: well formed
  uint64_t expectedConnections_ = 0;   // the victim's, before the late rank's
  bool rogueAnswered_ = false;         // the victim legitimately sent the rogue datagrams
  bool rogueFailed_ = false;           // the case ends with the rogue failed
  bool rogueLinked_ = false;           // the rogue connected and must say "nothing more" at close
  std::unique_ptr<Traffic> early_, late_;

 private:
  void closeAll();

  std::vector<std::unique_ptr<fabric::Domain>> domains_;
  std::unique_ptr<RoguePeer> rogue_;
  std::vector<std::unique_ptr<Context>> contexts_;
};

}  // namespace ibdt::messaging::testing
