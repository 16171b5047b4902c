// Matching semantics: wildcards, non-overtaking order, unexpected messages,
// truncation, cancel, communicators and bad input, for eager and rendezvous.
#include <gtest/gtest.h>

#include <chrono>
#include <numeric>
#include <vector>

#include "support/thread_ranks.h"
#include "support/scoped_env.h"

namespace ibdt::messaging::testing {
namespace {

using datatype::Datatype;
using namespace std::chrono_literals;

// Sizes on both sides of the eager and pipelined limits.
const std::vector<int64_t> kCounts = {0, 1, 63, 64, 65, 1000, 20000, 65536, 65537, 200000};

TEST(PointToPoint, ContiguousRoundTripEveryByte) {
  runRanks(2, smallOptions(), [](RankEnv& env) {
    Datatype type = Datatype::of<int32_t>();
    for (int64_t count : kCounts) {
      std::vector<int32_t> data(static_cast<size_t>(count) + 1, -7);
      if (env.rank == 0) {
        std::iota(data.begin(), data.end() - 1, static_cast<int32_t>(count));
        ASSERT_TRUE(env.context.send(data.data(), count, type, 1, 5).isOk());
        ASSERT_TRUE(env.context.recv(data.data(), count, type, 1, 6).isOk());
        for (int64_t i = 0; i < count; ++i) ASSERT_EQ(data[static_cast<size_t>(i)], -static_cast<int32_t>(i));
      } else {
        RecvInfo info;
        Status status = env.context.recv(data.data(), count, type, 0, 5, 0, &info);
        ASSERT_TRUE(status.isOk()) << status.toString();
        EXPECT_EQ(info.source, 0);
        EXPECT_EQ(info.tag, 5);
        EXPECT_EQ(info.bytes, count * 4);
        // Eager, then pipelined fragments; above that contiguous data goes in
        // place, or through the staging ring where the cost model finds the
        // provider's zero-copy path dearer.
        if (count * 4 <= 256) EXPECT_EQ(info.scheme, Scheme::kEager);
        else if (count * 4 <= Options().pipelineLimit) EXPECT_EQ(info.scheme, Scheme::kPipelined);
        else EXPECT_TRUE(info.scheme == Scheme::kContiguous || info.scheme == Scheme::kRwgUp) << schemeName(info.scheme);
        for (int64_t i = 0; i < count; ++i) ASSERT_EQ(data[static_cast<size_t>(i)], count + i) << "count " << count;
        EXPECT_EQ(data.back(), -7) << "written beyond the receive buffer";
        for (int64_t i = 0; i < count; ++i) data[static_cast<size_t>(i)] = -static_cast<int32_t>(i);
        ASSERT_TRUE(env.context.send(data.data(), count, type, 0, 6).isOk());
      }
    }
  });
}

TEST(PointToPoint, NonOvertakingOrderWithWildcardsFromManyRanks) {
  constexpr int kRanks = 4;
  constexpr int kMessages = 40;  // many more than the 4 credits
  runRanks(kRanks, smallOptions(), [](RankEnv& env) {
    Datatype type = Datatype::of<int64_t>();
    if (env.rank != 0) {
      std::vector<Request> requests;
      std::vector<std::vector<int64_t>> payloads(kMessages);
      for (int i = 0; i < kMessages; ++i) {
        // Alternate eager and rendezvous: order must hold across protocols.
        int64_t count = i % 3 == 0 ? 100 : 4;
        payloads[static_cast<size_t>(i)].assign(static_cast<size_t>(count), env.rank * 1000 + i);
        auto request = env.context.isend(payloads[static_cast<size_t>(i)].data(), count, type, 0, 10 + i % 2);
        ASSERT_TRUE(request.isOk()) << request.status().toString();
        requests.push_back(std::move(*request));
      }
      ASSERT_TRUE(env.context.waitAll(requests, soon()).isOk());
      return;
    }
    std::vector<int> next(kRanks, 0);
    std::vector<int64_t> buffer(100);
    for (int n = 0; n < (kRanks - 1) * kMessages; ++n) {
      RecvInfo info;
      Status status = env.context.recv(buffer.data(), 100, type, kAnySource, kAnyTag, 0, &info);
      ASSERT_TRUE(status.isOk()) << status.toString();
      int i = next[static_cast<size_t>(info.source)]++;
      ASSERT_EQ(buffer[0], info.source * 1000 + i) << "message overtaken";
      ASSERT_EQ(info.tag, 10 + i % 2);
      ASSERT_EQ(info.bytes, (i % 3 == 0 ? 100 : 4) * 8);
    }
  });
}

TEST(PointToPoint, TagSelectsAmongQueuedMessagesAndCommunicatorsAreSeparate) {
  runRanks(2, smallOptions(), [](RankEnv& env) {
    Datatype type = Datatype::of<int32_t>();
    if (env.rank == 0) {
      // Non-blocking: the rendezvous (tag 1) completes only once matched.
      std::vector<std::vector<int32_t>> payloads;
      std::vector<Request> requests;
      for (int tag = 0; tag < 3; ++tag) payloads.emplace_back(tag == 1 ? 500 : 5, tag);
      payloads.emplace_back(1, 99);
      for (int i = 0; i < 4; ++i) {
        auto& v = payloads[static_cast<size_t>(i)];
        auto request = env.context.isend(v.data(), static_cast<int64_t>(v.size()), type, 1, i < 3 ? i : 2,
                                         /*communicator=*/i < 3 ? 0 : 7);
        ASSERT_TRUE(request.isOk());
        requests.push_back(std::move(*request));
      }
      env.barrier();
      ASSERT_TRUE(env.context.waitAll(requests, soon()).isOk());
      return;
    }
    env.barrier();  // everything above is now unexpected (or in flight)
    std::vector<int32_t> v(500, -1);
    int32_t got = 0;
    ASSERT_TRUE(env.context.recv(&got, 1, type, 0, 2, 7).isOk());
    EXPECT_EQ(got, 99);
    ASSERT_TRUE(env.context.recv(v.data(), 500, type, 0, 2, 0).isOk());
    EXPECT_EQ(v[0], 2);
    ASSERT_TRUE(env.context.recv(v.data(), 500, type, 0, 1, 0).isOk());
    for (int i = 0; i < 500; ++i) ASSERT_EQ(v[static_cast<size_t>(i)], 1);
    ASSERT_TRUE(env.context.recv(v.data(), 500, type, 0, kAnyTag, 0).isOk());
    EXPECT_EQ(v[0], 0);
    EXPECT_GE(env.context.counters().unexpected, 1u);
  });
}

TEST(PointToPoint, TruncationDeliversWhatFitsAndNothingBeyond) {
  for (int64_t sent : {40, 5000}) {  // eager, rendezvous
    runRanks(2, smallOptions(), [sent](RankEnv& env) {
      Datatype type = Datatype::of<int16_t>();
      if (env.rank == 0) {
        std::vector<int16_t> v(static_cast<size_t>(sent));
        std::iota(v.begin(), v.end(), 1);
        ASSERT_TRUE(env.context.send(v.data(), sent, type, 1, 3).isOk());
        return;
      }
      int64_t room = sent / 2 + 1;
      std::vector<int16_t> v(static_cast<size_t>(sent), -1);
      RecvInfo info;
      auto request = env.context.irecv(v.data(), room, type, 0, 3);
      ASSERT_TRUE(request.isOk());
      Status status = env.context.wait(*request, &info, soon());
      EXPECT_EQ(status.code(), Code::kTruncated) << status.toString();
      EXPECT_EQ(info.bytes, room * 2);
      EXPECT_EQ(info.messageBytes, sent * 2);
      for (int64_t i = 0; i < room; ++i) ASSERT_EQ(v[static_cast<size_t>(i)], i + 1);
      for (int64_t i = room; i < sent; ++i) ASSERT_EQ(v[static_cast<size_t>(i)], -1) << "written beyond " << room;
    });
  }
}

TEST(PointToPoint, CancelPendingReceive) {
  runRanks(2, smallOptions(), [](RankEnv& env) {
    Datatype type = Datatype::of<int32_t>();
    if (env.rank == 1) {
      int32_t a = -1, b = -1;
      auto first = env.context.irecv(&a, 1, type, 0, 1);
      ASSERT_TRUE(first.isOk());
      ASSERT_TRUE(env.context.cancel(*first).isOk());
      EXPECT_EQ(env.context.wait(*first, nullptr, soon()).code(), Code::kCancelled);
      env.barrier();
      ASSERT_TRUE(env.context.recv(&b, 1, type, 0, 1).isOk());
      EXPECT_EQ(a, -1);
      EXPECT_EQ(b, 42);
      // A matched receive is not cancelled.
      auto done = env.context.irecv(&a, 1, type, 0, 2);
      ASSERT_TRUE(done.isOk());
      env.barrier();
      bool finished = false;
      for (int i = 0; i < 100000 && !finished; ++i) {
        auto tested = env.context.test(*done);
        ASSERT_TRUE(tested.isOk()) << tested.status().toString();
        finished = *tested;
      }
      ASSERT_TRUE(finished);
      EXPECT_EQ(env.context.cancel(*done).code(), Code::kState);
      EXPECT_TRUE(env.context.wait(*done).isOk());
      EXPECT_EQ(a, 43);
    } else {
      env.barrier();
      int32_t v = 42;
      ASSERT_TRUE(env.context.send(&v, 1, type, 1, 1).isOk());
      v = 43;
      ASSERT_TRUE(env.context.send(&v, 1, type, 1, 2).isOk());
      env.barrier();
    }
  });
}

TEST(PointToPoint, SelfMessagesBothProtocols) {
  runRanks(1, smallOptions(), [](RankEnv& env) {
    Datatype type = Datatype::of<double>();
    for (int64_t count : {3, 3000}) {
      std::vector<double> out(static_cast<size_t>(count)), in(static_cast<size_t>(count), 0);
      std::iota(out.begin(), out.end(), 0.5);
      auto recv = env.context.irecv(in.data(), count, type, 0, 0);
      auto send = env.context.isend(out.data(), count, type, 0, 0);
      ASSERT_TRUE(recv.isOk() && send.isOk());
      ASSERT_TRUE(env.context.wait(*send, nullptr, soon()).isOk());
      ASSERT_TRUE(env.context.wait(*recv, nullptr, soon()).isOk());
      EXPECT_EQ(in, out);
    }
  });
}

TEST(PointToPoint, BadInputIsRejected) {
  runRanks(2, smallOptions(), [](RankEnv& env) {
    Datatype type = Datatype::of<int32_t>();
    int32_t v = 0;
    EXPECT_EQ(env.context.isend(&v, 1, type, 2, 0).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(env.context.isend(&v, 1, type, -1, 0).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(env.context.isend(&v, 1, type, 1, -3).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(env.context.isend(&v, -1, type, 1, 0).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(env.context.isend(nullptr, 1, type, 1, 0).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(env.context.irecv(&v, 1, Datatype(), 1, 0).status().code(), Code::kInvalidArgument);
    auto uncommitted = Datatype::vector(2, 1, 2, type);
    ASSERT_TRUE(uncommitted.isOk());
    EXPECT_EQ(env.context.irecv(&v, 1, *uncommitted, 1, 0).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(env.context.irecv(&v, 1, type, 5, 0).status().code(), Code::kInvalidArgument);
    Request empty;
    EXPECT_EQ(env.context.wait(empty).code(), Code::kInvalidArgument);
  });
}

// A receive posted after its rendezvous request arrived, and refused at once
// (signature) or truncated to nothing, sends its reply while being posted:
// the receiver may never progress again (a collective whose run already
// failed returns, then its caller waits elsewhere), yet the sender finishes.
TEST(PointToPoint, RefusalOfAnUnexpectedRendezvousGoesOutWithoutFurtherProgress) {
  Options rendezvous = smallOptions();
  rendezvous.pipelineLimit = 0;
  rendezvous.pipelineLimitForced = true;
  for (bool signature : {true, false}) {
    runRanks(2, rendezvous, [signature](RankEnv& env) {
      const int64_t count = 4000;
      if (env.rank == 0) {
        std::vector<float> v(static_cast<size_t>(count), 1.5f);
        auto send = env.context.isend(v.data(), count, Datatype::of<float>(), 1, 0);
        ASSERT_TRUE(send.isOk());
        Status status = env.context.wait(*send, nullptr, soon());
        EXPECT_NE(status.code(), Code::kTimeout) << status.toString();
        env.barrier();
        return;
      }
      for (Deadline deadline = soon(); env.context.counters().unexpected == 0 && !deadline.expired();) {
        ASSERT_TRUE(env.context.progress().isOk());
        std::this_thread::yield();
      }
      ASSERT_EQ(env.context.counters().unexpected, 1u) << "the request to send never arrived";
      std::vector<int32_t> v(static_cast<size_t>(count), -1);
      auto recv = env.context.irecv(v.data(), signature ? count : 0, Datatype::of<int32_t>(), 0, 0);
      ASSERT_TRUE(recv.isOk());
      auto done = env.context.test(*recv);
      ASSERT_TRUE(done.isOk() && *done) << "refused at once";
      Status status = env.context.wait(*recv);
      EXPECT_EQ(status.code(), signature ? Code::kInvalidArgument : Code::kTruncated) << status.toString();
      for (int32_t x : v) ASSERT_EQ(x, -1);
      env.barrier();  // no progress here: the reply must already be on its way
    });
  }
}

TEST(PointToPoint, SignatureMismatchIsAnErrorAndWritesNothing) {
  for (int64_t count : {4, 400}) {
    runRanks(2, smallOptions(), [count](RankEnv& env) {
      if (env.rank == 0) {
        std::vector<float> v(static_cast<size_t>(count), 1.5f);
        ASSERT_TRUE(env.context.send(v.data(), count, Datatype::of<float>(), 1, 0).isOk());
        return;
      }
      std::vector<int32_t> v(static_cast<size_t>(count), -1);
      Status status = env.context.recv(v.data(), count, Datatype::of<int32_t>(), 0, 0);
      EXPECT_EQ(status.code(), Code::kInvalidArgument) << status.toString();
      for (int32_t x : v) ASSERT_EQ(x, -1);
    });
  }
}

}  // namespace
}  // namespace ibdt::messaging::testing

namespace ibdt::messaging::testing {
namespace {

TEST(PointToPoint, DeadPeerFailsItsOperationsAndNothingElse) {
  Ranks ranks = createRanks(3, Options());
  auto& contexts = ranks.contexts;
  ASSERT_TRUE(contexts[0] && contexts[1] && contexts[2]);
  Context& survivor = *contexts[0];
  Datatype type = Datatype::of<int32_t>();
  int32_t fromDead = -1, fromLive = -1;
  auto waiting = survivor.irecv(&fromDead, 1, type, 1, 0);
  ASSERT_TRUE(waiting.isOk());
  contexts[1].reset();  // rank 1 dies
  std::vector<int32_t> big(100000, 5);
  auto lost = survivor.isend(big.data(), static_cast<int64_t>(big.size()), type, 1, 0);
  ASSERT_TRUE(lost.isOk());
  Status status = survivor.wait(*lost, nullptr, Deadline::after(std::chrono::seconds(30)));
  EXPECT_EQ(status.code(), Code::kPeerFailed) << status.toString();
  EXPECT_EQ(survivor.wait(*waiting, nullptr, Deadline::after(std::chrono::seconds(30))).code(), Code::kPeerFailed);
  EXPECT_EQ(survivor.isend(big.data(), 1, type, 1, 0).status().code(), Code::kPeerFailed);
  EXPECT_EQ(fromDead, -1);
  // Rank 2 is unaffected.
  int32_t value = 77;
  auto recv = survivor.irecv(&fromLive, 1, type, 2, 0);
  ASSERT_TRUE(recv.isOk());
  auto send = contexts[2]->isend(&value, 1, type, 0, 0);
  ASSERT_TRUE(send.isOk());
  ASSERT_TRUE(completeBoth(survivor, *recv, *contexts[2], *send));
  ASSERT_TRUE(survivor.wait(*recv).isOk());
  ASSERT_TRUE(contexts[2]->wait(*send).isOk());
  EXPECT_EQ(fromLive, 77);
  contexts.clear();
}

// Regression: a misspelled IBDT_* name was ignored silently.
TEST(PointToPoint, ContextCreationWarnsAboutAMisspelledKnob) {
  ibdt::test::ScopedEnv typo("IBDT_MSG_EAGER_LIMT", "1K");
  ::testing::internal::CaptureStderr();
  { Ranks ranks = createRanks(1, smallOptions()); }
  std::string printed = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(printed.find("unknown IBDT_* environment variables: IBDT_MSG_EAGER_LIMT (did you mean "
                         "IBDT_MSG_EAGER_LIMIT?)"),
            std::string::npos)
      << printed;
}

// IBDT_MSG_SRQ_RANKS=0 asks for a shared receive queue at every job size; a
// domain that has none (here a loopback calling itself verbs) keeps each
// peer's own buffers and works as before (the pool itself:
// shared_receive_test.cc, and on Soft-RoCE tests/verbs/ci-verbs.sh).
TEST(PointToPoint, ADomainWithoutSharedReceiveQueuesKeepsPerPeerBuffers) {
  ibdt::test::ScopedEnv srq("IBDT_MSG_SRQ_RANKS", "0");
  fabric::Caps caps = loopbackCaps();
  caps.provider = "verbs";
  auto world = makeLoopbackWorld();
  auto domain = openLoopbackDomain(world, caps);
  ThreadExchange exchange(1);
  Bootstrap bootstrap{0, 1, [&exchange](std::span<const uint8_t> v) { return exchange.allgather(0, v); }};
  auto working = Context::create(*domain, bootstrap, smallOptions());
  ASSERT_TRUE(working.isOk()) << working.status().toString();
  int32_t out = 0x5eed, in = 0;
  auto recv = (*working)->irecv(&in, 1, Datatype::of<int32_t>(), 0, 1);
  ASSERT_TRUE(recv.isOk());
  ASSERT_TRUE((*working)->send(&out, 1, Datatype::of<int32_t>(), 0, 1).isOk());
  ASSERT_TRUE((*working)->wait(*recv).isOk());
  EXPECT_EQ(in, 0x5eed);
}

// Regression: an eager limit of 0..47 was accepted, then failed messages at
// run time (no room for a rendezvous reply in an eager buffer).
TEST(PointToPoint, EagerLimitBelowTheMinimumIsRefusedAtCreation) {
  auto world = makeLoopbackWorld();
  auto domain = openLoopbackDomain(world, loopbackCaps());
  ThreadExchange exchange(1);
  Bootstrap bootstrap{0, 1, [&exchange](std::span<const uint8_t> v) { return exchange.allgather(0, v); }};
  for (int64_t limit : {0, 1, 47}) {
    Options options = smallOptions();
    options.eagerLimit = limit;
    auto context = Context::create(*domain, bootstrap, options);
    ASSERT_EQ(context.status().code(), Code::kInvalidArgument) << limit;
    EXPECT_NE(context.status().toString().find("IBDT_MSG_EAGER_LIMIT=" + std::to_string(limit) +
                                               " is below the minimum of 48 bytes"),
              std::string::npos)
        << context.status().toString();
  }
  Options smallest = smallOptions();
  smallest.eagerLimit = 48;
  auto context = Context::create(*domain, bootstrap, smallest);
  ASSERT_TRUE(context.isOk()) << context.status().toString();
  // 48 bytes is enough for every protocol: eager, pipelined and rendezvous to self.
  Datatype type = Datatype::of<uint8_t>();
  for (int64_t bytes : {0, 48, 49, 5000, 300000}) {
    std::vector<uint8_t> out(static_cast<size_t>(bytes)), in(static_cast<size_t>(bytes) + 1, 0xee);
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i * 7 + 1);
    auto recv = (*context)->irecv(in.data(), bytes, type, 0, 3);
    ASSERT_TRUE(recv.isOk());
    ASSERT_TRUE((*context)->send(out.data(), bytes, type, 0, 3).isOk()) << bytes;
    ASSERT_TRUE((*context)->wait(*recv, nullptr, soon()).isOk()) << bytes;
    EXPECT_TRUE(std::equal(out.begin(), out.end(), in.begin())) << bytes;
    EXPECT_EQ(in.back(), 0xee);
  }
}

}  // namespace
}  // namespace ibdt::messaging::testing
