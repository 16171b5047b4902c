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
  CostModel model;
  ReplyInputs in;
  in.receiver = statsOf(1e6);
  in.forced = Scheme::kBcSpup;
  EXPECT_TRUE(receiverUsesUnpack(in, model));
  in.forced = Scheme::kMultiW;
  in.receiver = statsOf(1);
  EXPECT_FALSE(receiverUsesUnpack(in, model));
  // Both contiguous: a forced unpack scheme does not apply.
  in.forced = Scheme::kGeneric;
  in.sender.contiguous = true;
  in.receiver = statsOf(8, true);
  EXPECT_FALSE(receiverUsesUnpack(in, model));
  // The per-block override replaces the model.
  in.forced = Scheme::kAuto;
  in.sender.contiguous = false;
  in.unpackBelowOverride = 10;
  in.receiver = statsOf(9);
  EXPECT_TRUE(receiverUsesUnpack(in, model));
  in.receiver = statsOf(11);
  EXPECT_FALSE(receiverUsesUnpack(in, model));
}

TEST(SchemeSelect, ThresholdsComeFromTheCostModel) {
  CostModel model;
  model.packBytesPerNs = 10;
  model.transfer.allocatedPerSgeNs = 5;
  EXPECT_DOUBLE_EQ(model.packBelowBlock(), 50);
  EXPECT_TRUE(senderWantsPack(statsOf(49), model.packBelowBlock()));
  EXPECT_FALSE(senderWantsPack(statsOf(51), model.packBelowBlock()));
  EXPECT_FALSE(senderWantsPack(statsOf(4, true), model.packBelowBlock()));
  EXPECT_TRUE(receiverWantsUnpack(statsOf(3999), 4000));
  EXPECT_FALSE(receiverWantsUnpack(statsOf(4001), 4000));
  EXPECT_GT(measureMemcpyBytesPerNs(), 0);
}

// Costs shaped like the two providers: shm pins every remote page of a
// cross-memory attach and copies with the initiator's CPU; an HCA has no
// per-page cost and its DMA engine moves the bytes.
CostModel modelOf(const fabric::TransferCost& transfer, uint32_t maxSge) {
  CostModel model;
  model.memcpyBytesPerNs = 10;
  model.transfer = transfer;
  model.maxSge = maxSge;
  model.listLength = 256;
  return model;
}

CostModel shmLike() { return modelOf({500, 20, 130, 10, 50, 10, 20, true}, 64); }
CostModel hcaLike() { return modelOf({1000, 5, 0, 12, 1000, 12, 5, false}, 32); }

ReplyInputs vectorMessage(int64_t rows, double block, bool senderPacks) {
  ReplyInputs in;
  in.sender = SideLayout{static_cast<int64_t>(rows * block), false, rows, block};
  in.senderWantsPack = senderPacks;
  in.receiver.size = in.sender.bytes;
  in.receiver.blockCount = rows;
  in.receiver.meanBlock = block;
  in.segmentSize = segmentSizeFor(in.sender.bytes, 0);
  return in;
}

TEST(SchemeSelect, TheModelRanksSchemesByProvider) {
  // 128 blocks of 8 KiB: on shm pinning 3 pages per block costs more than the
  // unpack copy, which runs beside the sender's gather: RWG-UP, not Multi-W.
  ReplyInputs big = vectorMessage(128, 8192, false);
  EXPECT_TRUE(receiverUsesUnpack(big, shmLike()));
  // On an HCA the same blocks go zero-copy (Multi-W).
  EXPECT_FALSE(receiverUsesUnpack(big, hcaLike()));
  // Tiny blocks are unpacked everywhere.
  EXPECT_TRUE(receiverUsesUnpack(vectorMessage(4096, 16, true), hcaLike()));
  EXPECT_TRUE(receiverUsesUnpack(vectorMessage(4096, 16, true), shmLike()));
  // A large contiguous message on shm pipelines through a staging buffer;
  // a small one, and any on an HCA, is written in place.
  ReplyInputs contiguous;
  contiguous.sender = SideLayout{8 << 20, true, 1, double(8 << 20)};
  contiguous.receiver.size = 8 << 20;
  contiguous.receiver.contiguous = true;
  contiguous.receiver.blockCount = 1;
  contiguous.receiver.meanBlock = double(8 << 20);
  contiguous.segmentSize = segmentSizeFor(8 << 20, 0);
  EXPECT_TRUE(receiverUsesUnpack(contiguous, shmLike()));
  EXPECT_FALSE(receiverUsesUnpack(contiguous, hcaLike()));
  EXPECT_EQ(finalScheme(Scheme::kAuto, false, true, true, Scheme::kAuto, true, true), Scheme::kRwgUp);
}

TEST(SchemeSelect, SegmentSizeFollowsTheMessage) {
  EXPECT_EQ(segmentSizeFor(16 << 10, 0), 16 << 10);
  EXPECT_EQ(segmentSizeFor(128 << 10, 0), 32 << 10);
  EXPECT_EQ(segmentSizeFor(64 << 20, 0), 64 << 10);
  EXPECT_EQ(segmentSizeFor(64 << 20, 4096), 4096);
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

TEST(MessagingOptions, RingSegmentAndSpinKnobsAreChecked) {
  struct Case {
    const char* knob;
    const char* value;
    bool valid;
  };
  for (const Case& c : {Case{"IBDT_MSG_RING_SEGMENTS", "1", false}, Case{"IBDT_MSG_RING_SEGMENTS", "8", true},
                        Case{"IBDT_MSG_SEGMENT_SIZE", "32", false}, Case{"IBDT_MSG_SEGMENT_SIZE", "16K", true},
                        Case{"IBDT_MSG_SPIN", "lots", false}, Case{"IBDT_MSG_SPIN", "-1", false},
                        Case{"IBDT_MSG_SPIN", "0", true}}) {
    setenv(c.knob, c.value, 1);
    auto options = optionsFromEnvironment();
    EXPECT_EQ(options.isOk(), c.valid) << c.knob << "=" << c.value;
    if (!c.valid) {
      EXPECT_EQ(options.status().code(), Code::kInvalidArgument);
      EXPECT_NE(options.status().toString().find(c.knob), std::string::npos) << options.status().toString();
    }
    unsetenv(c.knob);
  }
  auto defaults = optionsFromEnvironment();
  ASSERT_TRUE(defaults.isOk());
  EXPECT_EQ(defaults->ringSegments, 4u);
  EXPECT_EQ(defaults->segmentSize, 0);  // auto
  EXPECT_LT(defaults->spins, 0);        // auto
}

TEST(MessagingOptions, EagerLimitHasALowerBound) {
  for (const char* value : {"0", "1", "47"}) {
    setenv("IBDT_MSG_EAGER_LIMIT", value, 1);
    auto options = optionsFromEnvironment();
    ASSERT_EQ(options.status().code(), Code::kInvalidArgument) << value;
    EXPECT_NE(options.status().toString().find(std::string("IBDT_MSG_EAGER_LIMIT=") + value +
                                               " is below the minimum of 48 bytes"),
              std::string::npos)
        << options.status().toString();
  }
  setenv("IBDT_MSG_EAGER_LIMIT", "48", 1);
  auto options = optionsFromEnvironment();
  ASSERT_TRUE(options.isOk()) << options.status().toString();
  EXPECT_EQ(options->eagerLimit, 48);
  unsetenv("IBDT_MSG_EAGER_LIMIT");
}

}  // namespace
}  // namespace ibdt::messaging
