// The connection Listener of every provider: datagrams between two
// listeners, many producers into one inbox (every datagram once, every byte
// checked), bad input, a full inbox and a dead peer (shm).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "fabric_harness.h"

namespace ibdt::fabric::testing {
namespace {

std::unique_ptr<Listener> listen(Domain& domain) {
  auto listener = domain.createListener();
  EXPECT_TRUE(listener.isOk()) << listener.status().toString();
  return listener.isOk() ? std::move(listener).value() : nullptr;
}

// A datagram of `length` bytes naming its sender and sequence number.
std::vector<uint8_t> datagram(uint32_t sender, uint32_t sequence, size_t length) {
  std::vector<uint8_t> bytes(length);
  fillPattern(bytes.data(), length, sender * 1000 + sequence);
  std::memcpy(bytes.data(), &sender, sizeof sender);
  std::memcpy(bytes.data() + 4, &sequence, sizeof sequence);
  return bytes;
}

// Polls until a datagram arrives (fails the test after 30 s).
std::vector<uint8_t> receiveOne(Listener& listener) {
  std::vector<uint8_t> bytes;
  auto deadline = Deadline::after(std::chrono::seconds(30));
  while (!deadline.expired()) {
    auto got = listener.receive(bytes);
    EXPECT_TRUE(got.isOk()) << got.status().toString();
    if (!got.isOk() || *got) return bytes;
    usleep(100);
  }
  ADD_FAILURE() << "no datagram within 30 s";
  return {};
}

// Sends, retrying while the provider answers kAgain.
Status sendRetrying(Listener& listener, uint32_t handle, const std::vector<uint8_t>& bytes) {
  auto deadline = Deadline::after(std::chrono::seconds(30));
  for (;;) {
    Status status = listener.send(handle, bytes);
    if (status.code() != Code::kAgain || deadline.expired()) return status;
    usleep(100);
  }
}

class ListenerTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ListenerTest, DatagramsBothWaysArriveWhole) {
  Node a = Node::open(GetParam());
  Node b = Node::open(GetParam());
  ASSERT_TRUE(a.domain && b.domain);
  auto la = listen(*a.domain);
  auto lb = listen(*b.domain);
  ASSERT_TRUE(la && lb);
  ASSERT_GE(la->maxDatagram(), 128u);
  std::vector<uint8_t> none;
  auto empty = la->receive(none);
  ASSERT_TRUE(empty.isOk());
  EXPECT_FALSE(*empty);
  auto toB = la->addPeer(lb->address());
  auto toA = lb->addPeer(la->address());
  ASSERT_TRUE(toB.isOk() && toA.isOk()) << toB.status().toString() << toA.status().toString();
  for (uint32_t i = 0; i < 20; ++i) {
    size_t length = 8 + (i * 37) % (la->maxDatagram() - 7);
    auto sent = datagram(1, i, length);
    ASSERT_TRUE(sendRetrying(*la, *toB, sent).isOk());
    EXPECT_EQ(receiveOne(*lb), sent) << "datagram " << i << " a->b";
    auto back = datagram(2, i, std::min(la->maxDatagram(), length + 3));
    ASSERT_TRUE(sendRetrying(*lb, *toA, back).isOk());
    EXPECT_EQ(receiveOne(*la), back) << "datagram " << i << " b->a";
  }
  EXPECT_TRUE(*la->receive(none) == false);
}

TEST_P(ListenerTest, RejectsBadAddressesHandlesAndSizes) {
  Node a = Node::open(GetParam());
  ASSERT_TRUE(a.domain);
  auto listener = listen(*a.domain);
  ASSERT_TRUE(listener);
  std::vector<uint8_t> garbage(listener->address().size(), 0x5a);
  EXPECT_EQ(listener->addPeer(garbage).status().code(), Code::kProtocol);
  EXPECT_EQ(listener->addPeer(std::vector<uint8_t>(3, 0)).status().code(), Code::kProtocol);
  auto self = listener->addPeer(listener->address());
  ASSERT_TRUE(self.isOk()) << self.status().toString();
  EXPECT_EQ(listener->send(*self + 7, datagram(0, 0, 16)).code(), Code::kInvalidArgument);
  EXPECT_EQ(listener->send(*self, {}).code(), Code::kInvalidArgument);
  EXPECT_EQ(listener->send(*self, datagram(0, 0, listener->maxDatagram() + 1)).code(), Code::kInvalidArgument);
  // Nothing was delivered by the refused sends.
  std::vector<uint8_t> bytes;
  EXPECT_FALSE(*listener->receive(bytes));
}

// Ranks 1..3 each send 100 datagrams to rank 0's listener; rank 0 gets
// each exactly once, whole. Sends are paced per 20 by a reply, so that a
// receive queue (verbs) never overflows.
TEST_P(ListenerTest, ManyProducersIntoOneInboxEveryDatagramOnce) {
  const std::string provider = GetParam();
  constexpr uint32_t kPerSender = 100, kBurst = 20;
  auto statuses = runForked(4, [&](Mesh& mesh) {
    Node node = Node::open(provider);
    ASSERT_TRUE(node.domain);
    auto listener = listen(*node.domain);
    ASSERT_TRUE(listener);
    std::vector<uint32_t> handles(4);
    for (int peer = 0; peer < 4; ++peer) {
      if (peer == mesh.rank()) continue;
      auto handle = listener->addPeer(mesh.swap(peer, listener->address()));
      ASSERT_TRUE(handle.isOk()) << handle.status().toString();
      handles[static_cast<size_t>(peer)] = *handle;
    }
    // A sender that finishes early must not exit while another rank still
    // connects to it (shm takes the peer's descriptor from its live process).
    mesh.barrier();
    size_t length = std::min<size_t>(listener->maxDatagram(), 128);
    if (mesh.rank() != 0) {
      for (uint32_t i = 0; i < kPerSender; ++i) {
        ASSERT_TRUE(sendRetrying(*listener, handles[0], datagram(static_cast<uint32_t>(mesh.rank()), i, length)).isOk());
        if ((i + 1) % kBurst == 0) {
          EXPECT_EQ(receiveOne(*listener).size(), 8u);  // rank 0 took the burst
        }
      }
      return;
    }
    std::map<uint32_t, std::set<uint32_t>> seen;
    std::map<uint32_t, uint32_t> sinceReply;
    for (uint32_t n = 0; n < 3 * kPerSender; ++n) {
      auto bytes = receiveOne(*listener);
      ASSERT_EQ(bytes.size(), length);
      uint32_t sender = 0, sequence = 0;
      std::memcpy(&sender, bytes.data(), 4);
      std::memcpy(&sequence, bytes.data() + 4, 4);
      ASSERT_TRUE(sender >= 1 && sender <= 3 && sequence < kPerSender) << sender << " " << sequence;
      EXPECT_TRUE(seen[sender].insert(sequence).second) << "duplicate " << sender << "/" << sequence;
      EXPECT_EQ(bytes, datagram(sender, sequence, length)) << "from " << sender << " #" << sequence;
      if (++sinceReply[sender] == kBurst) {
        sinceReply[sender] = 0;
        ASSERT_TRUE(sendRetrying(*listener, handles[sender], datagram(0, n, 8)).isOk());
      }
    }
    for (uint32_t sender = 1; sender <= 3; ++sender) EXPECT_EQ(seen[sender].size(), kPerSender);
  });
  expectAllPassed(statuses);
}

// shm: the inbox holds a bounded number of datagrams and says kAgain beyond;
// after the owner takes them, sending works again.
TEST_P(ListenerTest, FullInboxAnswersAgainThenRecovers) {
  if (GetParam() != "shm") GTEST_SKIP() << "a UD queue pair drops instead (the protocol above retries)";
  Node a = Node::open(GetParam());
  ASSERT_TRUE(a.domain);
  auto owner = listen(*a.domain);
  auto sender = listen(*a.domain);
  ASSERT_TRUE(owner && sender);
  auto handle = sender->addPeer(owner->address());
  ASSERT_TRUE(handle.isOk());
  uint32_t accepted = 0;
  Status status;
  while ((status = sender->send(*handle, datagram(1, accepted, 64))).isOk()) ++accepted;
  EXPECT_EQ(status.code(), Code::kAgain) << status.toString();
  EXPECT_GT(accepted, 0u);
  std::vector<uint8_t> bytes;
  for (uint32_t i = 0; i < accepted; ++i) {
    ASSERT_TRUE(*owner->receive(bytes));
    EXPECT_EQ(bytes, datagram(1, i, 64));
  }
  EXPECT_FALSE(*owner->receive(bytes));
  EXPECT_TRUE(sender->send(*handle, datagram(1, 0, 64)).isOk());
}

// shm: sending to the listener of a process that exited fails with kPeerFailed.
TEST_P(ListenerTest, DeadPeerIsReported) {
  if (GetParam() != "shm") GTEST_SKIP() << "verbs cannot tell (the connection protocol times out)";
  auto statuses = runForked(2, [&](Mesh& mesh) {
    Node node = Node::open(GetParam());
    ASSERT_TRUE(node.domain);
    auto listener = listen(*node.domain);
    ASSERT_TRUE(listener);
    auto handle = listener->addPeer(mesh.swap(1 - mesh.rank(), listener->address()));
    ASSERT_TRUE(handle.isOk()) << handle.status().toString();
    if (mesh.rank() == 1) {
      pid_t pid = getpid();
      mesh.swap(0, std::vector<uint8_t>(reinterpret_cast<uint8_t*>(&pid), reinterpret_cast<uint8_t*>(&pid) + 4));
      _exit(0);
    }
    auto bytes = mesh.swap(1, {});
    ASSERT_EQ(bytes.size(), 4u);
    pid_t victim = 0;
    std::memcpy(&victim, bytes.data(), 4);
    Status status;
    for (auto deadline = Deadline::after(std::chrono::seconds(30)); !deadline.expired(); usleep(1000)) {
      status = listener->send(*handle, datagram(0, 0, 16));
      if (status.code() == Code::kPeerFailed) break;
    }
    EXPECT_EQ(status.code(), Code::kPeerFailed) << status.toString();
    EXPECT_NE(status.message().find(std::to_string(victim)), std::string_view::npos) << status.toString();
  });
  ASSERT_EQ(statuses.size(), 2u);
  EXPECT_TRUE(WIFEXITED(statuses[0]) && WEXITSTATUS(statuses[0]) == 0);
}

INSTANTIATE_TEST_SUITE_P(Providers, ListenerTest, ::testing::ValuesIn(providersUnderTest()),
                         [](const auto& param) { return param.param; });

}  // namespace
}  // namespace ibdt::fabric::testing
