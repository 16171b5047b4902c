// A pool buffer's key on verbs is a type-2 memory window bound on the QP of
// the peer it is handed to (docs/security.md, "Pool buffers"): that peer
// reaches exactly the buffer, no byte before or after it, no neighbour of its
// chunk, no other QP, and nothing once the buffer is given back.
#include <cstring>

#include "tests/verbs/verbs_test_util.h"
#include "transport/memory/buffer_pool.h"

namespace ibdt::fabric::testing {
namespace {

constexpr size_t kBuffer = 4096;
constexpr uint8_t kSeed[3] = {31, 32, 33};

// Three neighbouring pool buffers, filled with patterns, whose keys are
// bound for the peer of `keyFor`; `peer` posts through its own QP.
struct Hand {
  memory::PoolBuffer buffers[3];
};

Hand handOut(memory::BufferPool& pool, Endpoint& keyFor) {
  Hand hand;
  for (int i = 0; i < 3; ++i) {
    auto buffer = pool.get(kBuffer, &keyFor);
    EXPECT_TRUE(buffer.isOk()) << buffer.status().toString();
    if (!buffer.isOk()) return hand;
    hand.buffers[i] = std::move(buffer).value();
    fillPattern(static_cast<uint8_t*>(hand.buffers[i].data()), kBuffer, kSeed[i]);
  }
  return hand;
}

// Every byte of the three buffers still holds its pattern.
void expectUntouched(const Hand& hand, int skip = -1) {
  for (int i = 0; i < 3; ++i) {
    if (i == skip) continue;
    auto* bytes = static_cast<const uint8_t*>(hand.buffers[i].data());
    for (size_t at = 0; at < kBuffer; ++at) {
      ASSERT_EQ(bytes[at], patternByte(at, kSeed[i])) << "buffer " << i << " changed at byte " << at;
    }
  }
}

// Posts one signalled request from `pair.a` and returns its completion.
Completion postOnce(Pair& pair, Opcode opcode, const MemoryRegion& local, uint32_t bytes, uint64_t address,
                    uint64_t rkey) {
  Sge sge = sgeOf(local, 0, bytes);
  SendRequest request{.id = 7, .opcode = opcode, .sgList = &sge, .numSge = 1, .remoteAddress = address,
                      .rkey = rkey};
  Status posted = pair.a->postSend(request);
  EXPECT_TRUE(posted.isOk()) << posted.toString();
  auto done = collect(*pair.cqA, 1);
  pollAll(*pair.cqB);  // retires the window requests on b, as messaging's progress does
  return done.empty() ? Completion{.status = CompletionStatus::kFatal} : done[0];
}

// A refused access: a remote access error whose Status says so; the buffers unchanged.
void expectRefused(const Completion& done, const Hand& hand) {
  EXPECT_EQ(done.status, CompletionStatus::kRemoteAccess) << completionStatusCode(done);
  Status status = completionError(done, "the pool's owner");
  EXPECT_EQ(status.code(), Code::kRemoteAccess) << status.toString();
  expectUntouched(hand);
}

struct WindowFixture {
  std::unique_ptr<Domain> domain;
  std::unique_ptr<memory::BufferPool> pool;
  std::unique_ptr<MemoryRegion> local;  // the peer's own memory: write source, read target
};

#define IBDT_WINDOW_FIXTURE_OR_SKIP(f)                                                                \
  WindowFixture f;                                                                                    \
  {                                                                                                   \
    IBDT_OPEN_VERBS_OR_SKIP(opened);                                                                  \
    f.domain = std::move(opened);                                                                     \
  }                                                                                                   \
  if (!f.domain->caps().memoryWindows) {                                                              \
    if (insideRxeVm()) FAIL() << "rdma_rxe on Linux 6.1 binds type-2 windows; caps say it does not";  \
    GTEST_SKIP() << "device has no type-2 memory windows: pool keys reach their chunk";              \
  }                                                                                                   \
  {                                                                                                   \
    auto pool = memory::BufferPool::create(*f.domain, memory::PoolOptions());                        \
    ASSERT_TRUE(pool.isOk()) << pool.status().toString();                                            \
    f.pool = std::move(pool).value();                                                                 \
    ASSERT_TRUE(f.pool->perBufferKeys());                                                             \
  }                                                                                                   \
  f.local = allocate(*f.domain, 2 * kBuffer);                                                         \
  ASSERT_TRUE(f.local)

TEST(VerbsWindows, APeerReadsAndWritesExactlyItsBuffer) {
  IBDT_WINDOW_FIXTURE_OR_SKIP(f);
  Pair pair = connectPair(*f.domain);
  ASSERT_TRUE(pair.a && pair.b);
  Hand hand = handOut(*f.pool, *pair.b);
  const memory::PoolBuffer& middle = hand.buffers[1];
  // Neighbours in one chunk, each with a key of its own.
  ASSERT_EQ(static_cast<uint8_t*>(middle.data()), static_cast<uint8_t*>(hand.buffers[0].data()) + kBuffer);
  ASSERT_EQ(static_cast<uint8_t*>(hand.buffers[2].data()), static_cast<uint8_t*>(middle.data()) + kBuffer);
  EXPECT_NE(middle.rkey(), hand.buffers[0].rkey());
  EXPECT_NE(middle.rkey(), hand.buffers[2].rkey());
  EXPECT_EQ(f.pool->counters().bufferKeys, 3u);

  // Read the whole buffer, then overwrite it whole.
  std::memset(bytesOf(*f.local), 0, f.local->length());
  Completion read = postOnce(pair, Opcode::kRead, *f.local, kBuffer, middle.remoteKey().address, middle.rkey());
  ASSERT_EQ(read.status, CompletionStatus::kSuccess) << completionStatusCode(read);
  for (size_t at = 0; at < kBuffer; ++at) ASSERT_EQ(bytesOf(*f.local)[at], patternByte(at, kSeed[1])) << at;
  fillPattern(bytesOf(*f.local), kBuffer, 77);
  Completion write = postOnce(pair, Opcode::kWrite, *f.local, kBuffer, middle.remoteKey().address, middle.rkey());
  ASSERT_EQ(write.status, CompletionStatus::kSuccess) << completionStatusCode(write);
  for (size_t at = 0; at < kBuffer; ++at) {
    ASSERT_EQ(static_cast<uint8_t*>(middle.data())[at], patternByte(at, 77)) << at;
  }
  expectUntouched(hand, 1);
}

// Each refused access fails its QP, so every case gets a fresh pair and
// fresh windows over the same three buffers.
struct Refusal {
  const char* what;
  Opcode opcode;
  int64_t offset;  // from the middle buffer's start
  uint32_t bytes;
};

class VerbsWindowRefusal : public ::testing::TestWithParam<Refusal> {};

TEST_P(VerbsWindowRefusal, IsARemoteAccessErrorAndChangesNothing) {
  const Refusal& refusal = GetParam();
  IBDT_WINDOW_FIXTURE_OR_SKIP(f);
  Pair pair = connectPair(*f.domain);
  ASSERT_TRUE(pair.a && pair.b);
  Hand hand = handOut(*f.pool, *pair.b);
  fillPattern(bytesOf(*f.local), f.local->length(), 91);
  const memory::PoolBuffer& middle = hand.buffers[1];
  uint64_t address = middle.remoteKey().address + refusal.offset;
  Completion done = postOnce(pair, refusal.opcode, *f.local, refusal.bytes, address, middle.rkey());
  expectRefused(done, hand);
  if (refusal.opcode == Opcode::kRead) {
    for (size_t at = 0; at < refusal.bytes; ++at) ASSERT_EQ(bytesOf(*f.local)[at], patternByte(at, 91)) << at;
  }
  EXPECT_EQ(pair.a->state(), EndpointState::kError);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, VerbsWindowRefusal,
    ::testing::Values(Refusal{"WriteOneByteBefore", Opcode::kWrite, -1, 1},
                      Refusal{"WriteStraddlingTheStart", Opcode::kWrite, -1, 8},
                      Refusal{"WriteOneByteAfter", Opcode::kWrite, kBuffer, 1},
                      Refusal{"WriteStraddlingTheEnd", Opcode::kWrite, kBuffer - 4, 8},
                      Refusal{"WriteTheNextBuffer", Opcode::kWrite, kBuffer, kBuffer},
                      Refusal{"WriteThePreviousBuffer", Opcode::kWrite, -static_cast<int64_t>(kBuffer), 64},
                      Refusal{"ReadOneByteBefore", Opcode::kRead, -1, 1},
                      Refusal{"ReadOneByteAfter", Opcode::kRead, kBuffer, 1},
                      Refusal{"ReadTheNextBuffer", Opcode::kRead, kBuffer, 64}),
    [](const ::testing::TestParamInfo<Refusal>& param) { return param.param.what; });

TEST(VerbsWindows, TheKeyWorksOnlyOnThePeersQueuePair) {
  IBDT_WINDOW_FIXTURE_OR_SKIP(f);
  Pair bound = connectPair(*f.domain);
  Pair other = connectPair(*f.domain);
  ASSERT_TRUE(bound.a && bound.b && other.a && other.b);
  Hand hand = handOut(*f.pool, *bound.b);
  const memory::PoolBuffer& middle = hand.buffers[1];
  fillPattern(bytesOf(*f.local), kBuffer, 5);
  Completion done = postOnce(other, Opcode::kWrite, *f.local, 64, middle.remoteKey().address, middle.rkey());
  expectRefused(done, hand);
  // The bound pair still works.
  Completion ok = postOnce(bound, Opcode::kWrite, *f.local, 64, middle.remoteKey().address, middle.rkey());
  EXPECT_EQ(ok.status, CompletionStatus::kSuccess) << completionStatusCode(ok);
}

TEST(VerbsWindows, TheKeyDiesWhenTheBufferIsGivenBack) {
  IBDT_WINDOW_FIXTURE_OR_SKIP(f);
  Pair pair = connectPair(*f.domain);
  ASSERT_TRUE(pair.a && pair.b);
  Hand hand = handOut(*f.pool, *pair.b);
  RemoteKey key = hand.buffers[1].remoteKey();
  void* data = hand.buffers[1].data();
  fillPattern(bytesOf(*f.local), kBuffer, 6);
  Completion ok = postOnce(pair, Opcode::kWrite, *f.local, 64, key.address, key.rkey);
  ASSERT_EQ(ok.status, CompletionStatus::kSuccess) << completionStatusCode(ok);
  hand.buffers[1].reset();  // invalidated before the slot is free again
  std::memset(data, 0, kBuffer);
  Completion stale = postOnce(pair, Opcode::kWrite, *f.local, 64, key.address, key.rkey);
  EXPECT_EQ(stale.status, CompletionStatus::kRemoteAccess) << completionStatusCode(stale);
  for (size_t at = 0; at < kBuffer; ++at) ASSERT_EQ(static_cast<uint8_t*>(data)[at], 0) << "written at " << at;
}

TEST(VerbsWindows, AHandOutForNoPeerHasNoRemoteKeyAndWindowsAreReused) {
  IBDT_WINDOW_FIXTURE_OR_SKIP(f);
  Pair pair = connectPair(*f.domain);
  ASSERT_TRUE(pair.a && pair.b);
  auto local = f.pool->get(kBuffer);  // a send-side pack buffer: no key leaves the process
  ASSERT_TRUE(local.isOk());
  std::memset(local->data(), 0, kBuffer);
  // Many hand-outs: windows come back from the cache, the send queue's
  // reserve never runs out while completions are polled.
  for (int round = 0; round < 300; ++round) {
    auto buffer = f.pool->get(kBuffer, pair.b.get());
    ASSERT_TRUE(buffer.isOk()) << "round " << round << ": " << buffer.status().toString();
    pollAll(*pair.cqB);
  }
  fillPattern(bytesOf(*f.local), kBuffer, 8);
  Completion done = postOnce(pair, Opcode::kWrite, *f.local, 64, local->remoteKey().address, local->rkey());
  EXPECT_EQ(done.status, CompletionStatus::kRemoteAccess) << completionStatusCode(done);
  for (size_t at = 0; at < kBuffer; ++at) ASSERT_EQ(static_cast<uint8_t*>(local->data())[at], 0) << at;
}

TEST(VerbsWindows, WindowsOfADestroyedEndpointAreRevokedWithIt) {
  IBDT_WINDOW_FIXTURE_OR_SKIP(f);
  memory::PoolBuffer kept;
  {
    Pair pair = connectPair(*f.domain);
    ASSERT_TRUE(pair.a && pair.b);
    auto buffer = f.pool->get(kBuffer, pair.b.get());
    ASSERT_TRUE(buffer.isOk()) << buffer.status().toString();
    kept = std::move(buffer).value();
  }
  kept.reset();  // after its endpoint: nothing left to invalidate, no crash
  auto again = f.pool->get(kBuffer);
  EXPECT_TRUE(again.isOk());
}

}  // namespace
}  // namespace ibdt::fabric::testing
