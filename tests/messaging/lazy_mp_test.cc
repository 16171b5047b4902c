// Connections on demand among real processes (ibdt-run, 2/4/8 ranks, the
// default provider): a sparse pattern connects only the ranks that talk,
// crossed connects from every rank at once, ANY_SOURCE receives from
// unconnected peers, and close() with messages in flight followed by no
// barrier at all. Every byte is checked.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "ibdt/messaging.h"
#include "messaging/mp_support.h"
#include "support/mp_test.h"

namespace ibdt::messaging {
namespace {

using datatype::Datatype;
using testing::mpDomain;
using testing::pattern;
using test::mpDeadline;
using test::mpStore;

std::unique_ptr<Context> lazyContext() {
  Options options;
  options.connect = Connect::kLazy;
  options.eagerLimit = 1024;
  options.segmentSize = 4000;
  auto context = Context::create(*mpDomain(), mpStore(), options, mpDeadline());
  EXPECT_TRUE(context.isOk()) << context.status().toString();
  return context.isOk() ? std::move(context).value() : nullptr;
}

// Message bytes from `from` to `to`: eager or rendezvous by `round`.
std::vector<uint8_t> message(int from, int to, int round) {
  size_t bytes = round % 2 == 0 ? 300 + 7 * static_cast<size_t>(from) : 50'000 + 13 * static_cast<size_t>(to);
  return pattern(bytes, static_cast<uint32_t>(from * 7919 + to * 31 + round));
}

const Datatype& bytes() {
  static Datatype type = Datatype::of<uint8_t>();
  return type;
}

// Rank 0 and the last rank talk; nobody else is connected to anybody.
TEST(LazyMp, SparsePatternConnectsOnlyThePair) {
  ASSERT_TRUE(mpDomain());
  auto context = lazyContext();
  ASSERT_TRUE(context);
  const int me = mpStore().rank(), last = mpStore().size() - 1;
  const int partner = me == 0 ? last : me == last ? 0 : -1;
  if (partner >= 0) {
    for (int round = 0; round < 4; ++round) {
      auto out = message(me, partner, round);
      std::vector<uint8_t> in(message(partner, me, round).size() + 8, 0xEE);
      auto recv = context->irecv(in.data(), static_cast<int64_t>(in.size()), bytes(), partner, round);
      ASSERT_TRUE(recv.isOk());
      ASSERT_TRUE(context->send(out.data(), static_cast<int64_t>(out.size()), bytes(), partner, round).isOk());
      RecvInfo info;
      ASSERT_TRUE(context->wait(*recv, &info, mpDeadline()).isOk());
      auto expect = message(partner, me, round);
      ASSERT_EQ(info.bytes, static_cast<int64_t>(expect.size()));
      expect.resize(in.size(), 0xEE);
      ASSERT_EQ(in, expect) << "round " << round;
    }
  }
  ASSERT_TRUE(context->close(mpDeadline()).isOk());
  EXPECT_EQ(context->counters().connections, partner >= 0 ? 1u : 0u);
}

// Every rank sends to every other before posting any receive: every pair
// is requested from both sides at once.
TEST(LazyMp, CrossedConnectsFromEveryRank) {
  ASSERT_TRUE(mpDomain());
  auto context = lazyContext();
  ASSERT_TRUE(context);
  const int me = mpStore().rank(), size = mpStore().size();
  std::vector<std::vector<uint8_t>> out(static_cast<size_t>(size)), in(static_cast<size_t>(size));
  std::vector<Request> requests;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == me) continue;
    out[static_cast<size_t>(peer)] = message(me, peer, peer);
    auto& o = out[static_cast<size_t>(peer)];
    auto send = context->isend(o.data(), static_cast<int64_t>(o.size()), bytes(), peer, 9);
    ASSERT_TRUE(send.isOk()) << send.status().toString();
    requests.push_back(std::move(*send));
  }
  for (int peer = 0; peer < size; ++peer) {
    if (peer == me) continue;
    auto& i = in[static_cast<size_t>(peer)];
    i.assign(message(peer, me, me).size(), 0);
    auto recv = context->irecv(i.data(), static_cast<int64_t>(i.size()), bytes(), peer, 9);
    ASSERT_TRUE(recv.isOk());
    requests.push_back(std::move(*recv));
  }
  Status status = context->waitAll(requests, mpDeadline());
  ASSERT_TRUE(status.isOk()) << status.toString();
  for (int peer = 0; peer < size; ++peer) {
    if (peer == me) continue;
    ASSERT_EQ(in[static_cast<size_t>(peer)], message(peer, me, me)) << "from rank " << peer;
  }
  EXPECT_EQ(context->counters().connections, static_cast<uint64_t>(size - 1));
  ASSERT_TRUE(context->close(mpDeadline()).isOk());
}

// Rank 0 posts ANY_SOURCE receives before anyone is connected to it.
TEST(LazyMp, AnySourceReceivesFromUnconnectedPeers) {
  ASSERT_TRUE(mpDomain());
  auto context = lazyContext();
  ASSERT_TRUE(context);
  const int me = mpStore().rank(), size = mpStore().size();
  if (me == 0) {
    std::vector<std::vector<uint8_t>> in(static_cast<size_t>(size - 1), std::vector<uint8_t>(60'000, 0));
    std::vector<Request> recvs;
    for (auto& buffer : in) {
      auto recv = context->irecv(buffer.data(), static_cast<int64_t>(buffer.size()), bytes(), kAnySource, kAnyTag);
      ASSERT_TRUE(recv.isOk());
      recvs.push_back(std::move(*recv));
    }
    ASSERT_TRUE(mpStore().barrier(mpDeadline()).isOk());
    std::set<int> sources;
    for (size_t i = 0; i < recvs.size(); ++i) {
      RecvInfo info;
      ASSERT_TRUE(context->wait(recvs[i], &info, mpDeadline()).isOk());
      auto expect = message(info.source, 0, info.tag);
      ASSERT_EQ(info.bytes, static_cast<int64_t>(expect.size()));
      ASSERT_TRUE(std::equal(expect.begin(), expect.end(), in[i].begin())) << "from rank " << info.source;
      EXPECT_TRUE(sources.insert(info.source).second);
    }
    EXPECT_EQ(sources.size(), static_cast<size_t>(size - 1));
  } else {
    ASSERT_TRUE(mpStore().barrier(mpDeadline()).isOk());
    auto out = message(me, 0, me);
    ASSERT_TRUE(context->send(out.data(), static_cast<int64_t>(out.size()), bytes(), 0, me).isOk());
  }
  ASSERT_TRUE(context->close(mpDeadline()).isOk());
}

// A ring of eager and rendezvous messages; each rank waits for its
// receives only, closes, and destroys its Context with no barrier.
TEST(LazyMp, CloseWithSendsInFlightThenNoBarrier) {
  ASSERT_TRUE(mpDomain());
  for (Connect connect : {Connect::kLazy, Connect::kEager}) {
    Options options;
    options.connect = connect;
    options.eagerLimit = 1024;
    options.eagerCredits = 4;
    auto created = Context::create(*mpDomain(), mpStore(), options, mpDeadline());
    ASSERT_TRUE(created.isOk()) << created.status().toString();
    auto context = std::move(created).value();
    const int me = mpStore().rank(), size = mpStore().size();
    const int next = (me + 1) % size, previous = (me + size - 1) % size;
    constexpr int kRounds = 16;
    std::vector<std::vector<uint8_t>> out, in;
    std::vector<Request> sends, recvs;
    for (int round = 0; round < kRounds; ++round) {
      out.push_back(message(me, next, round));
      in.emplace_back(message(previous, me, round).size(), 0);
    }
    for (int round = 0; round < kRounds; ++round) {
      auto& i = in[static_cast<size_t>(round)];
      auto& o = out[static_cast<size_t>(round)];
      auto recv = context->irecv(i.data(), static_cast<int64_t>(i.size()), bytes(), previous, round);
      auto send = context->isend(o.data(), static_cast<int64_t>(o.size()), bytes(), next, round);
      ASSERT_TRUE(recv.isOk() && send.isOk());
      recvs.push_back(std::move(*recv));
      sends.push_back(std::move(*send));
    }
    ASSERT_TRUE(context->waitAll(recvs, mpDeadline()).isOk());
    for (int round = 0; round < kRounds; ++round) {
      ASSERT_EQ(in[static_cast<size_t>(round)], message(previous, me, round)) << "round " << round;
    }
    Status closed = context->close(mpDeadline());
    ASSERT_TRUE(closed.isOk()) << closed.toString();
    for (Request& send : sends) ASSERT_TRUE(context->wait(send).isOk());
    context.reset();  // at once: no barrier, peers may still be closing
  }
}

}  // namespace
}  // namespace ibdt::messaging
