// Table 1 and the cost-model thresholds, as pure functions.
#include "transport/messaging/scheme_select.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace ibdt::messaging {
namespace {

datatype::Stats statsOf(double meanBlock, bool contiguous = false) {
  datatype::Stats stats;
  stats.meanBlock = meanBlock;
  stats.contiguous = contiguous;
  return stats;
}

TEST(SchemeSelect, Table1) {
  // sender pack, receiver unpack -> BC-SPUP; zero-copy + unpack -> RWG-UP;
  // anything + zero-copy -> Multi-W.
  EXPECT_EQ(finalScheme(Scheme::kAuto, true, false, true, Scheme::kAuto, false, true), Scheme::kBcSpup);
  EXPECT_EQ(finalScheme(Scheme::kAuto, false, false, true, Scheme::kAuto, false, true), Scheme::kRwgUp);
  EXPECT_EQ(finalScheme(Scheme::kAuto, true, false, false, Scheme::kAuto, false, true), Scheme::kMultiW);
  EXPECT_EQ(finalScheme(Scheme::kAuto, false, false, false, Scheme::kAuto, false, true), Scheme::kMultiW);
  // A contiguous sender lets a zero-copy receiver read with scatter, if it can read.
  EXPECT_EQ(finalScheme(Scheme::kAuto, false, true, false, Scheme::kAuto, false, true), Scheme::kPRrs);
  EXPECT_EQ(finalScheme(Scheme::kAuto, false, true, false, Scheme::kAuto, false, false), Scheme::kMultiW);
  EXPECT_EQ(finalScheme(Scheme::kMultiW, false, true, false, Scheme::kAuto, true, true), Scheme::kContiguous);
}

TEST(SchemeSelect, ForcedSchemesAndReceiverHints) {
  EXPECT_EQ(finalScheme(Scheme::kGeneric, true, false, true, Scheme::kAuto, false, true), Scheme::kGeneric);
  EXPECT_EQ(finalScheme(Scheme::kAuto, true, false, true, Scheme::kRwgUp, false, true), Scheme::kRwgUp);
  EXPECT_EQ(finalScheme(Scheme::kPRrs, true, false, false, Scheme::kAuto, false, true), Scheme::kPRrs);
  // P-RRS without RDMA READ falls back to Multi-W.
  EXPECT_EQ(finalScheme(Scheme::kPRrs, true, false, false, Scheme::kAuto, false, false), Scheme::kMultiW);
  // A forced scheme that does not fit the receiver's mode yields Table 1's choice.
  EXPECT_EQ(finalScheme(Scheme::kMultiW, true, false, true, Scheme::kAuto, false, true), Scheme::kBcSpup);
  EXPECT_TRUE(receiverUsesUnpack(Scheme::kBcSpup, false, statsOf(1e6), 10));
  EXPECT_FALSE(receiverUsesUnpack(Scheme::kMultiW, false, statsOf(1), 10));
  EXPECT_FALSE(receiverUsesUnpack(Scheme::kGeneric, true, statsOf(8, true), 10));
}

TEST(SchemeSelect, ThresholdsComeFromTheCostModel) {
  CostModel model;
  model.memcpyBytesPerNs = 10;
  model.transfer.perSgeNs = 5;
  model.transfer.perRequestNs = 100;
  model.transfer.perRemotePageNs = 300;
  EXPECT_DOUBLE_EQ(model.packBelowBlock(), 50);
  EXPECT_DOUBLE_EQ(model.unpackBelowBlock(), 4000);
  EXPECT_TRUE(senderWantsPack(statsOf(49), model.packBelowBlock()));
  EXPECT_FALSE(senderWantsPack(statsOf(51), model.packBelowBlock()));
  EXPECT_FALSE(senderWantsPack(statsOf(4, true), model.packBelowBlock()));
  EXPECT_TRUE(receiverWantsUnpack(statsOf(3999), model.unpackBelowBlock()));
  EXPECT_FALSE(receiverWantsUnpack(statsOf(4001), model.unpackBelowBlock()));
  EXPECT_GT(measureMemcpyBytesPerNs(), 0);
}

TEST(SchemeSelect, NamesRoundTrip) {
  for (int i = 0; i < kSchemeCount; ++i) {
    auto scheme = static_cast<Scheme>(i);
    auto parsed = parseScheme(schemeName(scheme));
    ASSERT_TRUE(parsed.isOk());
    EXPECT_EQ(*parsed, scheme);
  }
  EXPECT_EQ(parseScheme("zero-copy-please").status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace ibdt::messaging

namespace ibdt::messaging {
namespace {

TEST(MessagingOptions, BadEnvironmentValuesAreErrors) {
  setenv("IBDT_MSG_SCHEME", "teleport", 1);
  EXPECT_EQ(optionsFromEnvironment().status().code(), Code::kInvalidArgument);
  setenv("IBDT_MSG_SCHEME", "eager", 1);
  EXPECT_EQ(optionsFromEnvironment().status().code(), Code::kInvalidArgument);
  setenv("IBDT_MSG_SCHEME", "multi-w", 1);
  setenv("IBDT_MSG_PACK_BELOW", "lots", 1);
  EXPECT_EQ(optionsFromEnvironment().status().code(), Code::kInvalidArgument);
  setenv("IBDT_MSG_PACK_BELOW", "2K", 1);
  auto options = optionsFromEnvironment();
  ASSERT_TRUE(options.isOk()) << options.status().toString();
  EXPECT_EQ(options->forcedScheme, Scheme::kMultiW);
  EXPECT_EQ(options->packBelowBlock, 2048);
  EXPECT_LT(options->unpackBelowBlock, 0);  // auto
  unsetenv("IBDT_MSG_SCHEME");
  unsetenv("IBDT_MSG_PACK_BELOW");
}

}  // namespace
}  // namespace ibdt::messaging
