// Pipelined eager messages: fragments back to back with no handshake.
// Ranks are threads over the loopback fabric; every byte is checked, with
// guard bytes after each receive buffer.
#include <gtest/gtest.h>

#include <atomic>
#include <numeric>

#include "support/thread_ranks.h"

namespace ibdt::messaging {
namespace {

using datatype::Datatype;
using testing::RankEnv;
using testing::runRanks;
using namespace std::chrono_literals;

constexpr int64_t kGuard = 64;

Datatype committed(Result<Datatype> type) {
  EXPECT_TRUE(type.isOk()) << type.status().toString();
  EXPECT_TRUE(type->commit().isOk());
  return *type;
}

Datatype ints() { return Datatype::of<int32_t>(); }

Options pipelinedOptions() {
  Options options;
  options.eagerLimit = 512;
  options.eagerCredits = 4;        // fragments wait for credits
  options.pipelineLimit = 1 << 20;
  return options;
}

// Bytes count x type spans from its buffer's start (types here start at 0).
int64_t spanOf(const Datatype& type, int64_t count) { return (count - 1) * type.extent() + type.trueUb(); }

// A receive buffer of 0xEE with guard bytes after the span.
std::vector<uint8_t> guarded(const Datatype& type, int64_t count) {
  return std::vector<uint8_t>(static_cast<size_t>(spanOf(type, count) + kGuard), 0xEE);
}

std::vector<uint8_t> patterned(const Datatype& type, int64_t count, int seed) {
  std::vector<uint8_t> data(static_cast<size_t>(spanOf(type, count)));
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 31 + seed);
  return data;
}

// What a receive of `recvCount` x recvType holds after the sender's bytes
// (truncated to the receive) were unpacked into a buffer of 0xEE.
std::vector<uint8_t> expectedAfter(const std::vector<uint8_t>& source, const Datatype& sendType, int64_t sendCount,
                                   const Datatype& recvType, int64_t recvCount) {
  auto sendSegment = datatype::Segment::create(sendType, sendCount);
  auto recvSegment = datatype::Segment::create(recvType, recvCount);
  EXPECT_TRUE(sendSegment.isOk() && recvSegment.isOk());
  std::vector<uint8_t> packed(static_cast<size_t>(sendSegment->size()));
  EXPECT_TRUE(sendSegment->pack(source.data(), 0, sendSegment->size(), packed.data()).isOk());
  std::vector<uint8_t> expected = guarded(recvType, recvCount);
  int64_t fits = std::min(sendSegment->size(), recvSegment->size());
  if (fits > 0) {
    EXPECT_TRUE(recvSegment->unpack(expected.data(), 0, fits, packed.data()).isOk());
  }
  return expected;
}

void expectBytes(const std::vector<uint8_t>& got, const std::vector<uint8_t>& expected, std::string_view what) {
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], expected[i]) << what << ": byte " << i << " of " << got.size()
                                   << (i + kGuard >= got.size() ? " (guard)" : "");
  }
}

struct Case {
  Datatype type;
  int64_t count;
};

TEST(Pipelined, EveryByteAcrossFragmentBoundaries) {
  // Fragments of 333 bytes (inside elements and blocks) and automatic ones;
  // 4-byte blocks are packed per fragment, 1 KiB blocks gathered in place.
  for (int64_t fragment : {int64_t{333}, int64_t{0}}) {
    Options options = pipelinedOptions();
    options.segmentSize = fragment;
    runRanks(2, options, [&](RankEnv& env) {
      std::vector<Case> cases = {
          {committed(Datatype::vector(128, 1, 4096, ints())), 2},     // 4 B blocks, 1 KiB
          {committed(Datatype::vector(128, 256, 4096, ints())), 1},   // 1 KiB blocks, 128 KiB
          {committed(Datatype::vector(97, 3, 5, ints())), 7},         // odd sizes
          {ints(), 513},                                              // contiguous, eager limit + 1 element
          {ints(), 60000},                                            // contiguous, 234 KiB
      };
      int seed = 0;
      for (const Case& c : cases) {
        ++seed;
        std::vector<uint8_t> source = patterned(c.type, c.count, seed);
        if (env.rank == 0) {
          Status status = env.context.send(source.data(), c.count, c.type, 1, seed);
          ASSERT_TRUE(status.isOk()) << status.toString();
          continue;
        }
        std::vector<uint8_t> got = guarded(c.type, c.count);
        RecvInfo info;
        Status status = env.context.recv(got.data(), c.count, c.type, 0, seed, 0, &info);
        ASSERT_TRUE(status.isOk()) << status.toString();
        EXPECT_EQ(info.scheme, Scheme::kPipelined);
        EXPECT_EQ(info.bytes, c.type.size() * c.count);
        expectBytes(got, expectedAfter(source, c.type, c.count, c.type, c.count), "case " + std::to_string(seed));
      }
    });
  }
}

TEST(Pipelined, MismatchedLayoutsWithTheSameSignature) {
  runRanks(2, pipelinedOptions(), [&](RankEnv& env) {
    Datatype columns = committed(Datatype::vector(256, 5, 9, ints()));  // 1280 ints
    Datatype pairs = committed(Datatype::vector(640, 2, 3, ints()));    // 1280 ints
    std::vector<uint8_t> source = patterned(columns, 3, 5);
    if (env.rank == 0) {
      ASSERT_TRUE(env.context.send(source.data(), 3, columns, 1, 1).isOk());
      return;
    }
    std::vector<uint8_t> got = guarded(pairs, 3);
    ASSERT_TRUE(env.context.recv(got.data(), 3, pairs, 0, 1).isOk());
    expectBytes(got, expectedAfter(source, columns, 3, pairs, 3), "columns into pairs");
  });
}

TEST(Pipelined, UnexpectedWholeAndStillArriving) {
  Options options = pipelinedOptions();
  options.eagerCredits = 2;  // the sender stops after two fragments until credits return
  Datatype type = committed(Datatype::vector(64, 64, 100, ints()));  // 16 KiB: many 512-byte fragments
  std::atomic<bool> sentWhole{false}, adopted{false};
  runRanks(2, options, [&](RankEnv& env) {
    std::vector<uint8_t> first = patterned(type, 1, 1), second = patterned(type, 1, 2);
    if (env.rank == 0) {
      // All of `first` arrives before its receive is posted.
      ASSERT_TRUE(env.context.send(first.data(), 1, type, 1, 1).isOk());
      sentWhole = true;
      // `second` leaves two fragments at a time: the receiver returns
      // credits only as it goes on, and stops once its first fragment is in.
      auto request = env.context.isend(second.data(), 1, type, 1, 2);
      ASSERT_TRUE(request.isOk());
      while (!adopted) ASSERT_TRUE(env.context.progress().isOk());
      ASSERT_TRUE(env.context.wait(*request, nullptr, Deadline::after(60s)).isOk());
      return;
    }
    Deadline deadline = Deadline::after(60s);
    while (!sentWhole && !deadline.expired()) ASSERT_TRUE(env.context.progress().isOk());
    // `second` has started arriving (the sender posted at isend) once the
    // unexpected count reaches 2.
    while (env.context.counters().unexpected < 2 && !deadline.expired()) {
      ASSERT_TRUE(env.context.progress().isOk());
    }
    ASSERT_EQ(env.context.counters().unexpected, 2u);
    std::vector<uint8_t> gotSecond = guarded(type, 1), gotFirst = guarded(type, 1);
    auto late = env.context.irecv(gotSecond.data(), 1, type, 0, 2);
    ASSERT_TRUE(late.isOk());
    // Matched while arriving: it cannot be cancelled any more.
    EXPECT_EQ(env.context.cancel(*late).code(), Code::kState);
    adopted = true;
    RecvInfo info;
    ASSERT_TRUE(env.context.recv(gotFirst.data(), 1, type, 0, 1, 0, &info).isOk());
    EXPECT_EQ(info.scheme, Scheme::kPipelined);
    expectBytes(gotFirst, expectedAfter(first, type, 1, type, 1), "whole unexpected");
    ASSERT_TRUE(env.context.wait(*late, &info, Deadline::after(60s)).isOk());
    EXPECT_EQ(info.scheme, Scheme::kPipelined);
    expectBytes(gotSecond, expectedAfter(second, type, 1, type, 1), "taken over while arriving");
  });
}

TEST(Pipelined, TruncationDeliversWhatFitsAndTheStreamGoesOn) {
  runRanks(2, pipelinedOptions(), [&](RankEnv& env) {
    Datatype type = committed(Datatype::vector(100, 30, 40, ints()));  // 12000 B
    std::vector<uint8_t> big = patterned(type, 2, 3), next = patterned(type, 1, 4);
    if (env.rank == 0) {
      ASSERT_TRUE(env.context.send(big.data(), 2, type, 1, 1).isOk());
      ASSERT_TRUE(env.context.send(next.data(), 1, type, 1, 1).isOk());
      return;
    }
    std::vector<uint8_t> got = guarded(type, 1);
    RecvInfo info;
    Status status = env.context.recv(got.data(), 1, type, 0, 1, 0, &info);
    EXPECT_EQ(status.code(), Code::kTruncated) << status.toString();
    EXPECT_EQ(info.bytes, type.size());
    EXPECT_EQ(info.messageBytes, 2 * type.size());
    expectBytes(got, expectedAfter(big, type, 2, type, 1), "truncated");
    std::vector<uint8_t> after = guarded(type, 1);
    ASSERT_TRUE(env.context.recv(after.data(), 1, type, 0, 1).isOk());
    expectBytes(after, expectedAfter(next, type, 1, type, 1), "the message after");
  });
}

TEST(Pipelined, SignatureMismatchFailsOnlyThatReceive) {
  runRanks(2, pipelinedOptions(), [&](RankEnv& env) {
    std::vector<int32_t> values(4000);
    std::iota(values.begin(), values.end(), 1);
    if (env.rank == 0) {
      ASSERT_TRUE(env.context.send(values.data(), 4000, ints(), 1, 1).isOk());
      ASSERT_TRUE(env.context.send(values.data(), 4000, ints(), 1, 2).isOk());
      return;
    }
    std::vector<float> floats(4001, -1.0f);
    Status status = env.context.recv(floats.data(), 4000, Datatype::of<float>(), 0, 1);
    EXPECT_EQ(status.code(), Code::kInvalidArgument) << status.toString();
    std::vector<int32_t> got(4001, -7);
    ASSERT_TRUE(env.context.recv(got.data(), 4000, ints(), 0, 2).isOk());
    for (int i = 0; i < 4000; ++i) ASSERT_EQ(got[static_cast<size_t>(i)], i + 1) << i;
    EXPECT_EQ(got.back(), -7);
  });
}

TEST(Pipelined, AFailedReceiveReturnsOnlyOnceItsMessageIsConsumed) {
  // The receive fails at the first fragment (signature), but returns only
  // after the last: a receiver that then stops progressing must not leave
  // its peer's send waiting for credits.
  Options options = pipelinedOptions();
  options.eagerCredits = 2;
  std::atomic<bool> sent{false};
  runRanks(2, options, [&](RankEnv& env) {
    std::vector<int32_t> values(3000, 4);  // 12000 B: 24 fragments of 512 B
    if (env.rank == 0) {
      ASSERT_TRUE(env.context.send(values.data(), 3000, ints(), 1, 0).isOk());
      sent = true;
      return;
    }
    std::vector<float> floats(3001, -1.0f);
    Status status = env.context.recv(floats.data(), 3000, Datatype::of<float>(), 0, 0);
    EXPECT_EQ(status.code(), Code::kInvalidArgument) << status.toString();
    for (float f : floats) ASSERT_EQ(f, -1.0f) << "a failed receive wrote";
    Deadline hangGuard = Deadline::after(30s);
    while (!sent && !hangGuard.expired()) std::this_thread::yield();  // no progress here
    EXPECT_TRUE(sent) << "the sender still waits for the receiver";
    while (!sent) ASSERT_TRUE(env.context.progress().isOk());  // unstick it, to end the test
  });
}

TEST(Pipelined, OrderKeptBetweenEagerPipelinedAndRendezvousFromTwoSenders) {
  Options options = pipelinedOptions();
  options.pipelineLimit = 64 << 10;
  runRanks(3, options, [&](RankEnv& env) {
    // Sizes: pipelined, eager, pipelined, rendezvous, pipelined.
    const std::vector<int64_t> counts = {5000, 10, 3000, 40000, 1000};
    if (env.rank != 0) {
      std::vector<Request> requests;
      std::vector<std::vector<int32_t>> messages;
      for (size_t m = 0; m < counts.size(); ++m) {
        auto& data = messages.emplace_back(static_cast<size_t>(counts[m]));
        std::iota(data.begin(), data.end(), static_cast<int32_t>(env.rank * 1000000 + m * 100000));
      }
      for (auto& data : messages) {
        auto request = env.context.isend(data.data(), static_cast<int64_t>(data.size()), ints(), 0, 7);
        ASSERT_TRUE(request.isOk());
        requests.push_back(std::move(request).value());
      }
      ASSERT_TRUE(env.context.waitAll(requests, Deadline::after(60s)).isOk());
      return;
    }
    std::vector<size_t> next(3, 0);
    for (size_t received = 0; received < 2 * counts.size(); ++received) {
      std::vector<int32_t> got(40001, -7);
      RecvInfo info;
      ASSERT_TRUE(env.context.recv(got.data(), 40000, ints(), kAnySource, kAnyTag, 0, &info).isOk());
      size_t m = next[static_cast<size_t>(info.source)]++;
      ASSERT_LT(m, counts.size());
      ASSERT_EQ(info.bytes, counts[m] * 4) << "message " << m << " from rank " << info.source << " out of order";
      for (int64_t i = 0; i < counts[m]; ++i) {
        ASSERT_EQ(got[static_cast<size_t>(i)], static_cast<int32_t>(info.source * 1000000 + m * 100000 + i));
      }
      EXPECT_EQ(got[static_cast<size_t>(counts[m])], -7);
    }
  });
}

TEST(Pipelined, SenderDyingMidMessageFailsOnlyWhatItSent) {
  Options options = pipelinedOptions();
  options.eagerCredits = 2;
  testing::Ranks ranks = testing::createRanks(3, options);
  auto& contexts = ranks.contexts;
  ASSERT_TRUE(contexts[0] && contexts[1] && contexts[2]);
  Context& survivor = *contexts[0];
  std::vector<int32_t> values(20000, 9);
  std::vector<int32_t> got(20001, -7), unexpectedFrom2(20000, -7);
  // Rank 1's message to a posted receive, rank 2's to none: both start arriving.
  auto waiting = survivor.irecv(got.data(), 20000, ints(), 1, 0);
  ASSERT_TRUE(waiting.isOk());
  auto fromOne = contexts[1]->isend(values.data(), 20000, ints(), 0, 0);
  auto fromTwo = contexts[2]->isend(values.data(), 20000, ints(), 0, 1);
  ASSERT_TRUE(fromOne.isOk() && fromTwo.isOk());
  Deadline deadline = Deadline::after(30s);
  while (survivor.counters().unexpected < 1 && !deadline.expired()) {
    ASSERT_TRUE(survivor.progress().isOk());
    ASSERT_TRUE(contexts[1]->progress().isOk());
    ASSERT_TRUE(contexts[2]->progress().isOk());
  }
  ASSERT_EQ(survivor.counters().unexpected, 1u);
  Result<bool> partial = survivor.test(*waiting);
  ASSERT_TRUE(partial.isOk());
  ASSERT_FALSE(*partial) << "80000 bytes in fragments of 512 with 2 credits cannot be complete yet";
  contexts[1].reset();  // rank 1 dies mid-message
  contexts[2].reset();  // and so does rank 2, its message half queued as unexpected
  // The loopback fabric tells a peer of a death through its sends' completions
  // (shm also notices a dead process by itself). An eager send is complete
  // once copied, so its own status may be either.
  int32_t probe = 1;
  for (int dead : {1, 2}) {
    auto send = survivor.isend(&probe, 1, ints(), dead, 5);
    if (send.isOk()) (void)survivor.wait(*send, nullptr, Deadline::after(30s));
  }
  Status status = survivor.wait(*waiting, nullptr, Deadline::after(30s));
  EXPECT_EQ(status.code(), Code::kPeerFailed) << status.toString();
  EXPECT_EQ(got.back(), -7) << "written beyond the receive buffer";
  // Rank 2's partial message is gone with it: a wildcard receive does not get it.
  auto wildcard = survivor.irecv(unexpectedFrom2.data(), 20000, ints(), kAnySource, kAnyTag);
  ASSERT_TRUE(wildcard.isOk());
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(survivor.progress().isOk());
  Result<bool> matched = survivor.test(*wildcard);
  ASSERT_TRUE(matched.isOk());
  EXPECT_FALSE(*matched);
  EXPECT_EQ(unexpectedFrom2[0], -7);
  ASSERT_TRUE(survivor.cancel(*wildcard).isOk());
  contexts.clear();
}

}  // namespace
}  // namespace ibdt::messaging
