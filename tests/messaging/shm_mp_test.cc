// Messaging among real processes (ibdt-run, 2/4/8 ranks) over the default
// provider: every rank exchanges with every rank, itself included, under
// every forced scheme, with different send and receive layouts of one
// signature, eager and rendezvous sizes; every byte is checked.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ibdt/messaging.h"
#include "messaging/scheme_names.h"
#include "ibdt/store.h"
#include "messaging/mp_support.h"
#include "support/mp_test.h"

namespace ibdt::messaging {
namespace {

using datatype::Datatype;
using testing::mpDomain;
using testing::pattern;
using test::mpDeadline;
using test::mpStore;

Datatype committed(Result<Datatype> type) {
  EXPECT_TRUE(type.isOk());
  EXPECT_TRUE(type->commit().isOk());
  return *type;
}

int64_t spanOf(const Datatype& type, int64_t count) { return (count - 1) * type.extent() + type.trueUb(); }

void allPairs(Scheme scheme, int64_t units) {
  bootstrap::Store& store = mpStore();
  ASSERT_TRUE(mpDomain());
  Options options;
  options.eagerLimit = 1024;
  options.segmentSize = 4000;  // not a multiple of the element: boundaries inside them
  options.forcedScheme = scheme;
  auto context = Context::create(*mpDomain(), store, options, mpDeadline());
  ASSERT_TRUE(context.isOk()) << context.status().toString();
  Context& ctx = **context;
  const int me = store.rank(), size = store.size();
  // 12-byte blocks every 20 bytes sent; 8-byte blocks every 24 received.
  Datatype sendType = committed(Datatype::vector(64, 3, 5, Datatype::of<int32_t>()));
  Datatype recvType = committed(Datatype::vector(96, 2, 6, Datatype::of<int32_t>()));
  const int64_t sendCount = units, recvCount = units;
  std::vector<std::vector<uint8_t>> out(static_cast<size_t>(size)), in(static_cast<size_t>(size));
  std::vector<Request> requests;
  for (int peer = 0; peer < size; ++peer) {
    auto& o = out[static_cast<size_t>(peer)];
    auto& i = in[static_cast<size_t>(peer)];
    o = pattern(static_cast<size_t>(spanOf(sendType, sendCount)), static_cast<uint32_t>(me * 97 + peer));
    i.assign(static_cast<size_t>(spanOf(recvType, recvCount)) + 16, 0xEE);
    auto r = ctx.irecv(i.data(), recvCount, recvType, peer, 3);
    auto s = ctx.isend(o.data(), sendCount, sendType, peer, 3);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    ASSERT_TRUE(s.isOk()) << s.status().toString();
    requests.push_back(std::move(*r));
    requests.push_back(std::move(*s));
  }
  Status status = ctx.waitAll(requests, mpDeadline());
  ASSERT_TRUE(status.isOk()) << status.toString();
  auto sendSegment = datatype::Segment::create(sendType, sendCount);
  auto recvSegment = datatype::Segment::create(recvType, recvCount);
  ASSERT_TRUE(sendSegment.isOk() && recvSegment.isOk());
  for (int peer = 0; peer < size; ++peer) {
    auto source = pattern(static_cast<size_t>(spanOf(sendType, sendCount)), static_cast<uint32_t>(peer * 97 + me));
    std::vector<uint8_t> packed(static_cast<size_t>(sendSegment->size()));
    ASSERT_TRUE(sendSegment->pack(source.data(), 0, sendSegment->size(), packed.data()).isOk());
    std::vector<uint8_t> expect(in[static_cast<size_t>(peer)].size(), 0xEE);
    ASSERT_TRUE(recvSegment->unpack(expect.data(), 0, recvSegment->size(), packed.data()).isOk());
    ASSERT_EQ(in[static_cast<size_t>(peer)], expect) << "from rank " << peer;
  }
  ASSERT_TRUE(store.barrier(mpDeadline()).isOk());
  // Let every peer finish before the endpoints go away.
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(ctx.progress().isOk());
  ASSERT_TRUE(store.barrier(mpDeadline()).isOk());
}

class MessagingMp : public ::testing::TestWithParam<Scheme> {};

TEST_P(MessagingMp, EveryPairEagerAndRendezvous) {
  for (int64_t units : {1, 40}) {  // 768 B (eager) and 30 KiB (8 segments)
    allPairs(GetParam(), units);
    if (HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(Schemes, MessagingMp,
                         ::testing::Values(Scheme::kAuto, Scheme::kGeneric, Scheme::kBcSpup, Scheme::kRwgUp,
                                           Scheme::kPRrs, Scheme::kMultiW),
                         [](const auto& param) { return testing::schemeTestName(param.param); });

}  // namespace
}  // namespace ibdt::messaging
