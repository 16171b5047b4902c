// ProtocolSelector (transport/messaging/protocol_select.h): the sender's
// path by size and options, Table 1 through the selector, and the exchange
// single-copy threshold (docs/design.md, messaging).
#include "transport/messaging/protocol_select.h"

#include <gtest/gtest.h>

namespace ibdt::messaging {
namespace {

// Options with no tuning file, so that only the constants decide.
Options plainOptions() {
  Options options;
  options.tuneFile = "";
  options.eagerLimit = 8192;
  options.pipelineLimit = 65536;
  options.exchangeZeroCopyMin = 32768;
  return options;
}

// A send of `bytes` bytes of int32 on `communicator`.
Operation sendOf(int64_t bytes, uint32_t communicator = 0) {
  Operation op;
  op.isSend = true;
  op.count = bytes / 4;
  op.type = datatype::Datatype::of<int32_t>();
  op.bytes = bytes;
  op.communicator = communicator;
  return op;
}

class ProtocolSelectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fabric::Caps caps;
    caps.pageSize = 4096;
    ASSERT_TRUE(selector_.init(caps, 4, 1).isOk());
  }
  Options options_ = plainOptions();
  ProtocolSelector selector_{options_};
  TypeCache types_;
};

TEST_F(ProtocolSelectTest, SendPathBySize) {
  Operation small = sendOf(8192);
  Operation mid = sendOf(8196);
  Operation atLimit = sendOf(65536);
  Operation large = sendOf(65540);
  EXPECT_EQ(selector_.sendPath(small, types_), SendPath::kEager);
  EXPECT_EQ(selector_.sendPath(mid, types_), SendPath::kPipelined);
  EXPECT_EQ(selector_.sendPath(atLimit, types_), SendPath::kPipelined);
  EXPECT_EQ(selector_.sendPath(large, types_), SendPath::kRendezvous);
  EXPECT_EQ(selector_.tuning(), nullptr);
}

TEST_F(ProtocolSelectTest, ForcedSchemeSkipsPipelined) {
  options_.forcedScheme = Scheme::kBcSpup;
  Operation mid = sendOf(16384);
  Operation small = sendOf(4096);
  EXPECT_EQ(selector_.sendPath(mid, types_), SendPath::kRendezvous);
  EXPECT_EQ(selector_.sendPath(small, types_), SendPath::kEager);
}

TEST_F(ProtocolSelectTest, ExchangeTrafficTakesTheSingleCopyPath) {
  // Contiguous exchange traffic at or above exchangeZeroCopyMin goes by
  // rendezvous; below it, or on a user communicator, pipelined.
  Operation exchange = sendOf(32768, kFirstExchangeCommunicator);
  Operation below = sendOf(32764, kFirstExchangeCommunicator);
  Operation user = sendOf(32768, 0);
  EXPECT_EQ(selector_.sendPath(exchange, types_), SendPath::kRendezvous);
  EXPECT_EQ(selector_.sendPath(below, types_), SendPath::kPipelined);
  EXPECT_EQ(selector_.sendPath(user, types_), SendPath::kPipelined);
  EXPECT_TRUE(selector_.exchangeSingleCopy(kFirstExchangeCommunicator, 32768));
  EXPECT_FALSE(selector_.exchangeSingleCopy(kFirstExchangeCommunicator - 1, 1 << 20));
}

TEST_F(ProtocolSelectTest, FinalSchemeFollowsTable1) {
  // caps.rdmaRead is false: a contiguous sender to a zero-copy receiver writes (Multi-W).
  EXPECT_EQ(selector_.finalScheme(Scheme::kAuto, true, false, true, Scheme::kAuto, false), Scheme::kBcSpup);
  EXPECT_EQ(selector_.finalScheme(Scheme::kAuto, false, false, true, Scheme::kAuto, false), Scheme::kRwgUp);
  EXPECT_EQ(selector_.finalScheme(Scheme::kAuto, false, true, false, Scheme::kAuto, false), Scheme::kMultiW);
  EXPECT_EQ(selector_.finalScheme(Scheme::kAuto, false, true, false, Scheme::kAuto, true), Scheme::kContiguous);
}

TEST_F(ProtocolSelectTest, ContiguousDataIsNeverPacked) {
  datatype::Stats contiguous;
  contiguous.contiguous = true;
  contiguous.meanBlock = 4;
  EXPECT_FALSE(selector_.rendezvousPacks(contiguous));
  EXPECT_TRUE(selector_.fragmentsGather(contiguous));
}

}  // namespace
}  // namespace ibdt::messaging
