// Between processes, over every provider: every operation with 1 and
// max_sge entries from 0 bytes to 64 MiB between 2 processes; an exchange
// of sends and writes-with-immediate among 2, 4 and 8 processes; a peer
// killed mid-transfer (the survivor gets errors, not a hang). No file is
// ever left in /dev/shm. Processes are forked and swap endpoint addresses
// and remote keys over socketpairs.
#include <signal.h>
#include <unistd.h>

#include <array>
#include <cstring>

#include <gtest/gtest.h>

#include "fabric_harness.h"

namespace ibdt::fabric::testing {
namespace {

RemoteKey parseKey(const std::vector<uint8_t>& bytes) {
  auto key = RemoteKey::parse(bytes);
  EXPECT_TRUE(key.isOk()) << key.status().toString();
  return key.isOk() ? *key : RemoteKey{};
}

class MultiProcess : public ::testing::TestWithParam<std::string> {
 protected:
  void TearDown() override { EXPECT_TRUE(ibdtShmFiles().empty()) << "files left in /dev/shm"; }
};

// Rank 0 drives every operation against rank 1; each step is confirmed over
// the socket so rank 1 checks its memory at the right time.
TEST_P(MultiProcess, TwoProcessesEveryOperationUpTo64MiB) {
  const std::string provider = GetParam();
  constexpr size_t kLarge = size_t{64} << 20;
  auto statuses = runForked(2, [&](Mesh& mesh) {
    Node node = Node::open(provider);
    ASSERT_TRUE(node.domain);
    const Caps caps = node.domain->caps();
    uint32_t maxSge = std::min(caps.maxSendSge, caps.maxRecvSge);
    auto endpoint = node.endpoint();
    ASSERT_TRUE(endpoint);
    endpoint->setPeerLabel(strCat("rank ", 1 - mesh.rank()));
    ASSERT_TRUE(endpoint->connect(mesh.swap(1 - mesh.rank(), endpoint->address())).isOk());
    std::vector<uint8_t> user(kLarge);
    auto userRegion = node.registered(user);
    auto shared = node.allocated(kLarge);
    ASSERT_TRUE(userRegion && shared);
    auto peerUser = parseKey(mesh.swap(1 - mesh.rank(), keyBytes(userRegion->remoteKey())));
    auto peerShared = parseKey(mesh.swap(1 - mesh.rank(), keyBytes(shared->remoteKey())));

    struct Step {
      Opcode opcode;
      size_t size;
      uint32_t sges;
      bool toShared;  // target memory: provider-allocated or user
    };
    std::vector<Step> steps;
    for (Opcode opcode : {Opcode::kSend, Opcode::kWrite, Opcode::kWriteWithImm, Opcode::kRead}) {
      if (opcode == Opcode::kRead && !caps.rdmaRead) continue;
      if (opcode == Opcode::kWriteWithImm && !caps.writeWithImm) continue;
      for (uint32_t sges : {1u, maxSge}) {
        for (size_t size : {size_t{0}, size_t{1}, size_t{4097}, size_t{(1 << 20) + 5}}) {
          for (bool toShared : {false, true}) steps.push_back({opcode, size, sges, toShared});
        }
      }
      steps.push_back({opcode, std::min<size_t>(kLarge, caps.maxMessageSize), 1, false});  // rxe: 8 MiB
    }
    uint32_t seed = 10;
    for (const Step& step : steps) {
      ++seed;
      uint8_t* mine = step.toShared ? static_cast<uint8_t*>(shared->address()) : user.data();
      MemoryRegion& mineRegion = step.toShared ? *shared : *userRegion;
      RemoteKey theirs = step.toShared ? peerShared : peerUser;
      if (mesh.rank() == 1) {
        // Target side: prepare, let rank 0 act, then check.
        if (step.opcode == Opcode::kRead) {
          fillPattern(mine, step.size, seed);
        } else {
          std::memset(mine, 0, std::min(step.size + 64, kLarge));
        }
        if (step.opcode == Opcode::kSend || step.opcode == Opcode::kWriteWithImm) {
          postReceive(*endpoint, seed,
                      step.opcode == Opcode::kSend ? splitSges(mineRegion, mine, step.size, step.sges)
                                                   : std::vector<Sge>{});
        }
        mesh.swap(0, {});  // ready
        if (step.opcode == Opcode::kSend || step.opcode == Opcode::kWriteWithImm) {
          Completion received = expectSuccess(*node.recvQueue);
          EXPECT_EQ(received.id, seed);
          EXPECT_EQ(received.byteLength, step.size);
          EXPECT_EQ(received.hasImm, step.opcode == Opcode::kWriteWithImm);
          if (step.opcode == Opcode::kWriteWithImm) {
            EXPECT_EQ(received.immData, seed);
          }
        }
        mesh.swap(0, {});  // rank 0 is done
        if (step.opcode != Opcode::kRead) {
          EXPECT_EQ(firstMismatch(mine, step.size, seed), -1)
              << "opcode " << int(step.opcode) << " size " << step.size << " sges " << step.sges;
          if (step.size + 64 <= kLarge) {
            for (size_t i = step.size; i < step.size + 64; ++i) ASSERT_EQ(mine[i], 0) << "wrote past the end";
          }
        }
      } else {
        uint8_t* local = user.data();
        if (step.opcode == Opcode::kRead) {
          std::memset(local, 0, step.size);
        } else {
          fillPattern(local, step.size, seed);
        }
        mesh.swap(1, {});  // rank 1 is ready
        auto sges = splitSges(*userRegion, local, step.size, step.sges);
        Status posted = postOne(*endpoint, step.opcode, seed, sges, theirs.address, theirs.rkey, seed);
        ASSERT_TRUE(posted.isOk()) << posted.toString();
        Completion done = expectSuccess(*node.sendQueue);
        EXPECT_EQ(done.id, seed);
        if (step.opcode == Opcode::kRead) {
          EXPECT_EQ(firstMismatch(local, step.size, seed), -1) << "read of " << step.size << " bytes";
        }
        mesh.swap(1, {});
      }
    }
    mesh.barrier();
  });
  expectAllPassed(statuses);
}

// Every rank sends a message to every other rank and writes a block into
// its window with an immediate naming the writer.
void exchangeAmong(const std::string& provider, int size) {
  constexpr size_t kMessage = 4097;
  constexpr size_t kBlock = 3000;
  auto statuses = runForked(size, [&](Mesh& mesh) {
    Node node = Node::open(provider);
    ASSERT_TRUE(node.domain);
    uint32_t maxSge = std::min(node.domain->caps().maxSendSge, node.domain->caps().maxRecvSge);
    const int me = mesh.rank();
    std::vector<std::unique_ptr<Endpoint>> endpoints(size);
    std::vector<uint8_t> inbox(size * kMessage), outbox(size * kMessage + size * kBlock);
    auto window = node.allocated(size * kBlock);
    auto inboxRegion = node.registered(inbox);
    auto outboxRegion = node.registered(outbox);
    ASSERT_TRUE(window && inboxRegion && outboxRegion);
    std::memset(window->address(), 0, size * kBlock);
    std::vector<RemoteKey> windows(size);
    for (int peer = 0; peer < size; ++peer) {
      if (peer == me) continue;
      endpoints[peer] = node.endpoint();
      ASSERT_TRUE(endpoints[peer]);
      endpoints[peer]->setPeerLabel(strCat("rank ", peer));
      // Receives go up before the address leaves, so no send can miss one.
      postReceive(*endpoints[peer], 100 + peer,
                  splitSges(*inboxRegion, inbox.data() + peer * kMessage, kMessage, maxSge));
      postReceive(*endpoints[peer], 200 + peer, {});
      ASSERT_TRUE(endpoints[peer]->connect(mesh.swap(peer, endpoints[peer]->address())).isOk());
      windows[peer] = parseKey(mesh.swap(peer, keyBytes(window->remoteKey())));
    }
    mesh.barrier();
    for (int peer = 0; peer < size; ++peer) {
      if (peer == me) continue;
      uint8_t* message = outbox.data() + peer * kMessage;
      fillPattern(message, kMessage, me * 64 + peer);
      ASSERT_TRUE(postOne(*endpoints[peer], Opcode::kSend, peer, splitSges(*outboxRegion, message, kMessage, maxSge))
                      .isOk());
      uint8_t* block = outbox.data() + size * kMessage + peer * kBlock;
      fillPattern(block, kBlock, 1000 + me * 64 + peer);
      ASSERT_TRUE(postOne(*endpoints[peer], Opcode::kWriteWithImm, 1000 + peer, splitSges(*outboxRegion, block, kBlock, 2),
                          windows[peer].address + me * kBlock, windows[peer].rkey, 5000 + me)
                      .isOk());
    }
    int sendsLeft = 2 * (size - 1);
    int receivesLeft = 2 * (size - 1);
    while (sendsLeft > 0 || receivesLeft > 0) {
      if (sendsLeft > 0) {
        expectSuccess(*node.sendQueue);
        --sendsLeft;
      }
      if (receivesLeft > 0) {
        Completion received = expectSuccess(*node.recvQueue);
        if (received.status != CompletionStatus::kSuccess) return;
        --receivesLeft;
        if (received.opcode == Opcode::kRecv) {
          int from = static_cast<int>(received.id) - 100;
          EXPECT_EQ(received.byteLength, kMessage);
          EXPECT_EQ(firstMismatch(inbox.data() + from * kMessage, kMessage, from * 64 + me), -1) << "from " << from;
        } else {
          EXPECT_EQ(received.opcode, Opcode::kRecvWriteWithImm);
          int from = static_cast<int>(received.immData) - 5000;
          ASSERT_TRUE(from >= 0 && from < size && from != me);
          EXPECT_EQ(received.id, 200u + from);
          auto* bytes = static_cast<uint8_t*>(window->address());
          EXPECT_EQ(firstMismatch(bytes + from * kBlock, kBlock, 1000 + from * 64 + me), -1) << "window of " << from;
        }
      }
    }
    mesh.barrier();
  });
  expectAllPassed(statuses);
}

TEST_P(MultiProcess, ExchangeAmong2) { exchangeAmong(GetParam(), 2); }
TEST_P(MultiProcess, ExchangeAmong4) { exchangeAmong(GetParam(), 4); }
TEST_P(MultiProcess, ExchangeAmong8) { exchangeAmong(GetParam(), 8); }

// 8 ranks on 2 cores, tiny queues: each rank streams 150 messages to every
// other with a send queue of 8 and 4 posted receives per endpoint, so posts
// keep hitting back-pressure and senders keep waiting for receivers that are
// not running. Everything must still arrive, in order, intact.
TEST_P(MultiProcess, ManySmallMessagesAmong8WithTinyQueuesAllArriveInOrder) {
  const std::string provider = GetParam();
  constexpr int kRanks = 8;
  constexpr uint32_t kMessages = 150;
  constexpr uint32_t kSendDepth = 8;
  constexpr uint32_t kReceives = 4;
  constexpr size_t kMessage = 40;
  auto statuses = runForked(kRanks, [&](Mesh& mesh) {
    Node node = Node::open(provider, 1024);
    ASSERT_TRUE(node.domain);
    const int me = mesh.rank();
    EndpointOptions options;
    options.sendQueueDepth = kSendDepth;
    options.recvQueueDepth = kReceives;
    // Twice the send depth: the buffer of message k is written before its post
    // is tried, while messages k-8 .. k-1 may still be outstanding.
    constexpr uint32_t kSendSlots = 2 * kSendDepth;
    std::vector<uint8_t> outbox(kRanks * kSendSlots * kMessage), inbox(kRanks * kReceives * kMessage);
    auto outboxRegion = node.registered(outbox);
    auto inboxRegion = node.registered(inbox);
    std::vector<std::unique_ptr<Endpoint>> endpoints(kRanks);
    std::vector<int> peerOf(1024, -1);  // endpoint id -> peer rank
    auto slotOf = [&](int peer, uint32_t slot) { return inbox.data() + (peer * kReceives + slot) * kMessage; };
    for (int peer = 0; peer < kRanks; ++peer) {
      if (peer == me) continue;
      endpoints[peer] = node.endpoint(options);
      ASSERT_TRUE(endpoints[peer]);
      peerOf.at(endpoints[peer]->id()) = peer;
      for (uint32_t slot = 0; slot < kReceives; ++slot) {
        postReceive(*endpoints[peer], peer * kReceives + slot, splitSges(*inboxRegion, slotOf(peer, slot), kMessage, 1));
      }
      ASSERT_TRUE(endpoints[peer]->connect(mesh.swap(peer, endpoints[peer]->address())).isOk());
    }
    mesh.barrier();
    std::vector<uint32_t> sent(kRanks, 0), received(kRanks, 0);
    uint32_t completed = 0;
    const uint32_t expected = kMessages * (kRanks - 1);
    uint32_t receivedTotal = 0;
    Completion completions[16];
    while (completed < expected || receivedTotal < expected) {
      bool progress = false;
      for (int peer = 0; peer < kRanks; ++peer) {
        if (peer == me || sent[peer] == kMessages) continue;
        uint8_t* message = outbox.data() + (peer * kSendSlots + sent[peer] % kSendSlots) * kMessage;
        fillPattern(message, kMessage, (me * kRanks + peer) * kMessages + sent[peer]);
        Status status = postOne(*endpoints[peer], Opcode::kSend, sent[peer], splitSges(*outboxRegion, message, kMessage, 1));
        if (status.code() == Code::kAgain) continue;
        ASSERT_TRUE(status.isOk()) << status.toString();
        ++sent[peer];
        progress = true;
      }
      for (size_t n; (n = node.sendQueue->poll(completions)) > 0; progress = true) {
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(completions[i].status, CompletionStatus::kSuccess);
        completed += static_cast<uint32_t>(n);
      }
      for (size_t n; (n = node.recvQueue->poll(completions)) > 0; progress = true) {
        for (size_t i = 0; i < n; ++i) {
          const Completion& c = completions[i];
          ASSERT_EQ(c.status, CompletionStatus::kSuccess) << completionStatusName(c.status);
          int from = peerOf.at(c.endpointId);
          ASSERT_GE(from, 0);
          uint32_t slot = static_cast<uint32_t>(c.id) % kReceives;
          ASSERT_EQ(firstMismatch(slotOf(from, slot), kMessage, (from * kRanks + me) * kMessages + received[from]), -1)
              << "message " << received[from] << " from rank " << from << " (out of order or damaged)";
          ++received[from];
          ++receivedTotal;
          postReceive(*endpoints[from], c.id, splitSges(*inboxRegion, slotOf(from, slot), kMessage, 1));
        }
      }
      if (!progress) {
        // Sleep instead of spinning: the ranks we wait for need the cores.
        (void)node.recvQueue->wait(Deadline::after(std::chrono::milliseconds(1)));
      }
    }
    mesh.barrier();
  });
  expectAllPassed(statuses);
}

// Rank 1 connects and then never answers; rank 0 kills it while sends wait
// for receives that will never be posted. Rank 0 must get errors, not hang.
TEST_P(MultiProcess, PeerKilledMidTransferFailsTheSurvivorsRequests) {
  const std::string provider = GetParam();
  auto statuses = runForked(2, [&](Mesh& mesh) {
    Node node = Node::open(provider);
    ASSERT_TRUE(node.domain);
    auto endpoint = node.endpoint();
    ASSERT_TRUE(endpoint);
    std::vector<uint8_t> buffer(1 << 20);
    auto region = node.registered(buffer);
    auto shared = node.allocated(1 << 20);  // a segment the kill must not leak
    ASSERT_TRUE(endpoint->connect(mesh.swap(1 - mesh.rank(), endpoint->address())).isOk());
    auto peerKey = parseKey(mesh.swap(1 - mesh.rank(), keyBytes(region->remoteKey())));
    if (mesh.rank() == 1) {
      mesh.swap(0, word(static_cast<uint64_t>(getpid())));
      for (;;) pause();  // killed by rank 0
    }
    auto victim = static_cast<pid_t>(unword(mesh.swap(1, {})));
    ASSERT_GT(victim, 0);
    postReceive(*endpoint, 900, splitSges(*region, buffer.data(), 4096, 1));
    fillPattern(buffer.data(), buffer.size(), 3);
    constexpr int kSends = 4;
    for (int i = 0; i < kSends; ++i) {
      ASSERT_TRUE(postOne(*endpoint, Opcode::kSend, i, splitSges(*region, buffer.data(), 65536, 1)).isOk());
    }
    ASSERT_EQ(kill(victim, SIGKILL), 0);
    // Writes after the death fail as well.
    postOne(*endpoint, Opcode::kWrite, 77, splitSges(*region, buffer.data(), 65536, 4), peerKey.address, peerKey.rkey)
        .isOk();
    bool sawPeerFailure = false;
    for (int i = 0; i < kSends + 1; ++i) {
      Completion completion = nextCompletion(*node.sendQueue);
      EXPECT_NE(completion.status, CompletionStatus::kSuccess) << "request " << completion.id;
      if (completion.status == CompletionStatus::kRetryExceeded) sawPeerFailure = true;
    }
    EXPECT_TRUE(sawPeerFailure) << "no request reported the peer's death";
    EXPECT_EQ(endpoint->state(), EndpointState::kError);
    if (provider == "shm") {
      // shm also fails receives from a dead peer (verbs receives wait forever).
      EXPECT_NE(nextCompletion(*node.recvQueue).status, CompletionStatus::kSuccess);
    }
  });
  ASSERT_EQ(statuses.size(), 2u);
  EXPECT_TRUE(WIFEXITED(statuses[0]) && WEXITSTATUS(statuses[0]) == 0) << "survivor failed";
  EXPECT_TRUE(WIFSIGNALED(statuses[1]) && WTERMSIG(statuses[1]) == SIGKILL);
}

INSTANTIATE_TEST_SUITE_P(Providers, MultiProcess, ::testing::ValuesIn(providersUnderTest()),
                         [](const auto& param) { return param.param; });

}  // namespace
}  // namespace ibdt::fabric::testing
