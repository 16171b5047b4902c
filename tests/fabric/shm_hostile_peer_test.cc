// shm only: a peer maps our domain and endpoint segments writable (it rings
// our doorbells, sets our activity bits, writes our notification ring), so
// it can rewrite anything in them at any time. None of that may let it reach
// memory of ours that we did not register for it (docs/security.md):
//   * our registration table: the bounce path (IBDT_SHM_CMA=off, where no
//     ptrace permission is granted) checks against our private copy;
//   * our posted receives' scatter lists: a bounce receive scatters into
//     what we posted, not into what the shared slot says now;
//   * the capacities and offsets in a peer's headers: checked once without
//     overflow at attach/connect and kept, never read again.
#include <stdlib.h>

#include <algorithm>
#include <cstring>

#include <gtest/gtest.h>

#include "fabric_harness.h"
#include "transport/fabric/shm/layout.h"
#include "transport/fabric/shm/peer.h"
#include "transport/fabric/shm/registration_table.h"
#include "base/shared_region.h"

namespace ibdt::fabric::testing {
namespace {

using ibdt::SharedRegion;

// The shm endpoint address as a peer receives it (transport/fabric/shm/endpoint.cc).
struct EndpointAddress {
  uint32_t magic, version, pid, endpointId;
  int32_t domainFd, endpointFd;
  uint64_t domainInode, endpointInode;
};

EndpointAddress parseAddress(const Endpoint& endpoint) {
  std::vector<uint8_t> bytes = endpoint.address();
  EndpointAddress address{};
  EXPECT_EQ(bytes.size(), sizeof address);
  std::memcpy(&address, bytes.data(), std::min(bytes.size(), sizeof address));
  return address;
}

// Two shm nodes in this process with cross-memory attach off, so one-sided
// access to user memory goes through the target's bounce service.
class ShmHostilePeer : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("IBDT_SHM_CMA", "off", 1);
    victim_ = Node::open("shm");
    attacker_ = Node::open("shm");
    ASSERT_TRUE(victim_.domain && attacker_.domain);
    victimEndpoint_ = victim_.endpoint();
    attackerEndpoint_ = attacker_.endpoint();
    ASSERT_TRUE(victimEndpoint_ && attackerEndpoint_);
  }
  void TearDown() override { unsetenv("IBDT_SHM_CMA"); }

  // Maps the victim's domain or endpoint segment, as the attacker can.
  enum class Segment { kDomain, kEndpoint };
  Result<SharedRegion> victimSegment(Segment which) {
    EndpointAddress address = parseAddress(*victimEndpoint_);
    auto pid = static_cast<pid_t>(address.pid);
    return which == Segment::kDomain ? SharedRegion::openPeer(pid, address.domainFd, address.domainInode)
                                     : SharedRegion::openPeer(pid, address.endpointFd, address.endpointInode);
  }

  // Polls the victim (which serves bounce requests) until the attacker's
  // request completes; returns that completion.
  Completion attackerCompletion() {
    Completion completion[1];
    for (int i = 0; i < 2'000'000; ++i) {
      Completion ignored[4];
      (void)victim_.recvQueue->poll(ignored);
      if (attacker_.sendQueue->poll(completion) == 1) return completion[0];
    }
    ADD_FAILURE() << "the attacker's request never completed";
    return {};
  }

  Node victim_, attacker_;
  std::unique_ptr<Endpoint> victimEndpoint_, attackerEndpoint_;
};

TEST_F(ShmHostilePeer, RewrittenRegistrationTableGrantsNothingBeyondTheRegistration) {
  constexpr size_t kRegistered = 4096, kTotal = 3 * 4096;
  std::vector<uint8_t> memory(kTotal);
  fillPattern(memory.data(), kTotal, 1);
  auto region = victim_.domain->registerMemory(memory.data(), kRegistered, kLocalWrite | kRemoteWrite);
  ASSERT_TRUE(region.isOk());
  connectPair(*victimEndpoint_, *attackerEndpoint_);

  // The attacker widens the victim's entry in the shared table to the whole vector.
  auto domainSegment = victimSegment(Segment::kDomain);
  ASSERT_TRUE(domainSegment.isOk());
  const auto* header = reinterpret_cast<const shm::DomainHeader*>(domainSegment->data());
  auto* entries = reinterpret_cast<shm::RegionEntry*>(domainSegment->data() + header->regionsOffset);
  shm::RegionEntry& entry = entries[shm::rkeyIndex((*region)->remoteKey().rkey)];
  ASSERT_EQ(entry.length.load(), kRegistered);
  entry.length.store(kTotal);

  std::vector<uint8_t> payload(64);
  fillPattern(payload.data(), payload.size(), 2);
  auto source = attacker_.registered(payload, kLocalWrite);
  const uint64_t beyond = reinterpret_cast<uint64_t>(memory.data()) + kRegistered + 100;
  ASSERT_TRUE(postOne(*attackerEndpoint_, Opcode::kWrite, 1, splitSges(*source, payload.data(), payload.size(), 1),
                      beyond, (*region)->remoteKey().rkey)
                  .isOk());
  attackerCompletion();
  EXPECT_EQ(firstMismatch(memory.data(), kTotal, 1), -1) << "the victim wrote outside its registration";

  // Inside the registration the bounce write still lands.
  ASSERT_TRUE(postOne(*attackerEndpoint_, Opcode::kWrite, 2, splitSges(*source, payload.data(), payload.size(), 1),
                      reinterpret_cast<uint64_t>(memory.data()) + 8, (*region)->remoteKey().rkey)
                  .isOk());
  EXPECT_EQ(attackerCompletion().status, CompletionStatus::kSuccess);
  EXPECT_EQ(firstMismatch(memory.data() + 8, payload.size(), 2), -1);
}

TEST_F(ShmHostilePeer, RewrittenReceiveSlotCannotRedirectABounceReceive) {
  constexpr size_t kInbox = 4096, kMessage = 100;
  std::vector<uint8_t> inbox(kInbox), secret(kInbox);
  fillPattern(inbox.data(), kInbox, 3);
  fillPattern(secret.data(), kInbox, 4);
  const std::vector<uint8_t> inboxBefore = inbox;
  auto inboxRegion = victim_.registered(inbox, kLocalWrite);
  auto secretRegion = victim_.registered(secret, kLocalWrite);  // registered, but never posted
  postReceive(*victimEndpoint_, 7, splitSges(*inboxRegion, inbox.data(), kInbox, 1));
  connectPair(*victimEndpoint_, *attackerEndpoint_);

  // The attacker points the victim's posted receive (ring slot 0) at `secret`.
  auto segment = victimSegment(Segment::kEndpoint);
  ASSERT_TRUE(segment.isOk());
  const auto* header = reinterpret_cast<const shm::EndpointHeader*>(segment->data());
  auto* slot = reinterpret_cast<shm::RecvSlot*>(segment->data() + header->recvRingOffset);
  ASSERT_EQ(slot->numSge, 1u);
  ASSERT_EQ(slot->sge[0].address, reinterpret_cast<uint64_t>(inbox.data()));
  slot->sge[0].address = reinterpret_cast<uint64_t>(secret.data());
  slot->sge[0].regionIndex = shm::lkeyIndex(secretRegion->lkey());

  std::vector<uint8_t> message(kMessage);
  fillPattern(message.data(), kMessage, 5);
  auto source = attacker_.registered(message, kLocalWrite);
  ASSERT_TRUE(postOne(*attackerEndpoint_, Opcode::kSend, 1, splitSges(*source, message.data(), kMessage, 1)).isOk());
  attackerCompletion();
  Completion received = expectSuccess(*victim_.recvQueue);
  EXPECT_EQ(received.id, 7u);
  EXPECT_EQ(received.byteLength, kMessage);
  EXPECT_EQ(firstMismatch(secret.data(), kInbox, 4), -1) << "the message went where the peer pointed";
  EXPECT_EQ(firstMismatch(inbox.data(), kMessage, 5), -1) << "the message did not reach the posted receive";
  EXPECT_TRUE(std::equal(inbox.begin() + kMessage, inbox.end(), inboxBefore.begin() + kMessage));
}

// A forged domain segment laid out as a peer's: header, region table,
// doorbells at the very end of the mapping, and an activity bitmap of one
// word followed by a guard word.
struct ForgedDomain {
  static constexpr uint32_t kRegions = 4, kDoorbells = 2;
  SharedRegion segment;
  shm::DomainHeader* header = nullptr;
  uint64_t* guard = nullptr;

  static ForgedDomain make() {
    ForgedDomain forged;
    size_t pageSize = 4096;
    auto created = SharedRegion::create("forged-domain", pageSize);
    EXPECT_TRUE(created.isOk());
    if (!created.isOk()) return forged;
    forged.segment = std::move(created).value();
    forged.header = reinterpret_cast<shm::DomainHeader*>(forged.segment.data());
    forged.header->magic = shm::kDomainMagic;
    forged.header->version = shm::kLayoutVersion;
    forged.header->regionCapacity = kRegions;
    forged.header->regionsOffset = 2 * shm::kCacheLine;
    forged.header->activityCapacity = 64;
    forged.header->activityOffset = 2 * shm::kCacheLine + kRegions * sizeof(shm::RegionEntry);
    forged.header->doorbellCapacity = kDoorbells;
    forged.header->doorbellsOffset = forged.segment.length() - kDoorbells * sizeof(shm::Doorbell);
    forged.guard = reinterpret_cast<uint64_t*>(forged.segment.data() + forged.header->activityOffset) + 1;
    *forged.guard = 0x5a5a5a5a5a5a5a5aull;
    return forged;
  }
  Result<std::unique_ptr<shm::PeerDomain>> attach() const {
    return shm::PeerDomain::attach(getpid(), segment.fd(), segment.inode());
  }
};

TEST(ShmHostileDomain, OffsetsThatWrapAroundAreRefusedAtAttach) {
  struct Case {
    const char* name;
    void (*forge)(shm::DomainHeader&);
  };
  const Case cases[] = {
      {"region table offset near 2^64", [](shm::DomainHeader& h) { h.regionsOffset = ~uint64_t{0} - 63; }},
      {"doorbell offset near 2^64", [](shm::DomainHeader& h) { h.doorbellsOffset = ~uint64_t{0} - 63; }},
      {"activity offset near 2^64", [](shm::DomainHeader& h) { h.activityOffset = ~uint64_t{0} - 63; }},
      {"activity bitmap past the end", [](shm::DomainHeader& h) { h.activityCapacity = 1u << 20; }},
      {"region table past the end", [](shm::DomainHeader& h) { h.regionCapacity = 1u << 20; }},
  };
  ForgedDomain good = ForgedDomain::make();
  ASSERT_TRUE(good.attach().isOk()) << "the well-formed forged segment must attach";
  for (const Case& test : cases) {
    ForgedDomain forged = ForgedDomain::make();
    test.forge(*forged.header);
    auto attached = forged.attach();
    ASSERT_FALSE(attached.isOk()) << test.name;
    EXPECT_EQ(attached.status().code(), Code::kProtocol) << test.name;
    EXPECT_NE(attached.status().message().find("foreign layout"), std::string::npos) << attached.status().toString();
  }
}

TEST(ShmHostileDomain, CapacitiesRewrittenAfterAttachAreNotTrusted) {
  ForgedDomain forged = ForgedDomain::make();
  auto peer = forged.attach();
  ASSERT_TRUE(peer.isOk()) << peer.status().toString();
  forged.header->regionCapacity = 1u << 30;
  forged.header->doorbellCapacity = 1u << 30;
  forged.header->activityCapacity = 1u << 30;
  // Each would reach past the mapping (the doorbells end it) if trusted.
  (*peer)->ring(ForgedDomain::kDoorbells + 1000);
  shm::RemotePiece piece;
  EXPECT_EQ((*peer)->checkAccess(shm::makeRkey(1u << 20, 1), 0, 8, kRemoteWrite, piece),
            CompletionStatus::kRemoteAccess);
  auto* bitmap = reinterpret_cast<uint64_t*>(forged.segment.data() + forged.header->activityOffset);
  (*peer)->markActive(64);
  (*peer)->markActive(1u << 29);
  EXPECT_EQ(bitmap[0], 0u);
  EXPECT_EQ(*forged.guard, 0x5a5a5a5a5a5a5a5aull);
  (*peer)->markActive(5);  // inside: the bit is set
  EXPECT_EQ(bitmap[0], uint64_t{1} << 5);
}

}  // namespace
}  // namespace ibdt::fabric::testing
