// Exchange communicators (kFirstExchangeCommunicator and up): a contiguous
// message of at least Options::exchangeZeroCopyMin bytes skips the
// pipelined eager path, and a contiguous receive takes it single-copy; a
// strided receive, a smaller message, another communicator or the knob at 0
// keep their usual path. Every case checks every byte and guard bytes.
#include <gtest/gtest.h>

#include <vector>

#include "support/thread_ranks.h"

namespace ibdt::messaging::testing {
namespace {

using datatype::Datatype;

constexpr uint32_t kExchange = kFirstExchangeCommunicator + 5;
constexpr int64_t kGuardInts = 16;

struct Case {
  uint32_t communicator;
  int64_t ints;          // message size in int32
  bool stridedReceive;   // every other int of a twice larger buffer
  int64_t zeroCopyMin;   // Options::exchangeZeroCopyMin
  Scheme expected;       // kAuto: any rendezvous scheme but the contiguous one
};

int32_t valueAt(int64_t i) { return static_cast<int32_t>(i * 7 + 3); }

void runCase(const Case& c) {
  Options options;
  options.exchangeZeroCopyMin = c.zeroCopyMin;
  runRanks(2, options, [&](RankEnv& env) {
    Datatype ints = Datatype::of<int32_t>();
    if (env.rank == 0) {
      std::vector<int32_t> data(static_cast<size_t>(c.ints));
      for (int64_t i = 0; i < c.ints; ++i) data[static_cast<size_t>(i)] = valueAt(i);
      ASSERT_TRUE(env.context.send(data.data(), c.ints, ints, 1, 4, c.communicator).isOk());
      return;
    }
    auto every = Datatype::resized(ints, 0, 8);
    ASSERT_TRUE(every.isOk());
    ASSERT_TRUE(every->commit().isOk());
    const Datatype& type = c.stridedReceive ? *every : ints;
    const int64_t stride = c.stridedReceive ? 2 : 1;
    std::vector<int32_t> buffer(static_cast<size_t>(c.ints * stride + kGuardInts), -1);
    RecvInfo info;
    Status status = env.context.recv(buffer.data(), c.ints, type, 0, 4, c.communicator, &info);
    ASSERT_TRUE(status.isOk()) << status.toString();
    EXPECT_EQ(info.bytes, c.ints * 4);
    if (c.expected == Scheme::kAuto) {
      EXPECT_TRUE(info.scheme != Scheme::kContiguous && info.scheme != Scheme::kPipelined &&
                  info.scheme != Scheme::kEager)
          << "got " << schemeName(info.scheme) << ", expected a rendezvous scheme for a strided receive";
    } else {
      EXPECT_EQ(info.scheme, c.expected) << "got " << schemeName(info.scheme) << ", expected "
                                         << schemeName(c.expected);
    }
    for (int64_t i = 0; i < c.ints * stride + kGuardInts; ++i) {
      const bool data = i < c.ints * stride && i % stride == 0;
      ASSERT_EQ(buffer[static_cast<size_t>(i)], data ? valueAt(i / stride) : -1) << "int " << i;
    }
  });
}

TEST(ExchangeTraffic, LargeContiguousMessagesGoSingleCopy) {
  runCase({kExchange, 100000 / 4, false, 65536, Scheme::kContiguous});
  runCase({kFirstExchangeCommunicator, 65536 / 4, false, 65536, Scheme::kContiguous});
}

TEST(ExchangeTraffic, OtherMessagesKeepTheirPath) {
  // Below the threshold, on a point-to-point communicator, or switched off.
  runCase({kExchange, 65532 / 4, false, 65536, Scheme::kPipelined});
  runCase({kFirstExchangeCommunicator - 1, 100000 / 4, false, 65536, Scheme::kPipelined});
  runCase({kExchange, 100000 / 4, false, 0, Scheme::kPipelined});
  // A strided receive cannot take the contiguous path: the rendezvous the
  // sender chose picks another scheme, and every byte still arrives.
  runCase({kExchange, 100000 / 4, true, 65536, Scheme::kAuto});
}

}  // namespace
}  // namespace ibdt::messaging::testing
