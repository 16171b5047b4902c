// A rogue sender asks for a zero-copy reply (Multi-W) into a receive whose
// struct type has two blocks 1 MiB apart in one mapping, as a release
// build's heap places separately allocated buffers. Before the span bound
// (transport/memory/peer_span.h) the victim registered the whole span and
// handed the rogue a key that wrote anywhere in between (issue 17); now it
// replies with an unpack buffer, and a write into the gap through the key it
// gave is refused by the shm provider. See hostile_control_test.cc for the frame.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "messaging/hostile_world.h"

namespace ibdt::messaging::testing {
namespace {

using datatype::Datatype;
using wire::Kind;

constexpr size_t kBlock = 4096;
constexpr size_t kGap = size_t{1} << 20;
constexpr uint8_t kSecret = 0x5C;

// [block][1 MiB of someone else's data][block], one read-write mapping.
class DistantReceive {
 public:
  DistantReceive() {
    void* memory = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(memory, MAP_FAILED);
    base_ = static_cast<uint8_t*>(memory);
    std::memset(base_, 0, kBytes);
    std::memset(gap(), kSecret, kGap);
  }
  ~DistantReceive() { munmap(base_, kBytes); }
  uint8_t* data() const { return base_; }
  uint8_t* gap() const { return base_ + kBlock; }
  static Datatype type() {
    std::vector<int64_t> lengths = {kBlock, kBlock}, displacements = {0, kBlock + kGap};
    auto type = Datatype::hindexed(lengths, displacements, Datatype::of<uint8_t>());
    EXPECT_TRUE(type.isOk() && type->commit().isOk());
    return *type;
  }
  uint8_t at(size_t packed) const { return packed < kBlock ? base_[packed] : base_[kGap + packed]; }
  bool gapIntact() const { return std::all_of(gap(), gap() + kGap, [](uint8_t b) { return b == kSecret; }); }

 private:
  static constexpr size_t kBytes = kBlock + kGap + kBlock;
  uint8_t* base_ = nullptr;
};

class HostileSpan : public HostileWorld {
 protected:
  // The rogue's RTS for 2 x kBlock bytes of uint8, forcing Multi-W; returns the victim's reply.
  wire::Cts askForZeroCopy() { return rogueAsks(contiguousRts(41, kBytes, Scheme::kMultiW), kBytes); }
  static constexpr int64_t kBytes = 2 * kBlock;
};

TEST_F(HostileSpan, AZeroCopyReplyNeverKeysTheGapBetweenDistantBlocks) {
  DistantReceive receive;
  auto recv = victim().irecv(receive.data(), 1, DistantReceive::type(), kRogue, kRogueTag);
  ASSERT_TRUE(recv.isOk()) << recv.status().toString();
  wire::Cts cts = askForZeroCopy();
  ASSERT_EQ(cts.mode, wire::ReplyMode::kUnpack) << "the victim keyed its receive's whole span";
  ASSERT_EQ(cts.bytes, kBytes);
  auto gapBegin = reinterpret_cast<uint64_t>(receive.gap());
  EXPECT_TRUE(cts.remoteAddress + cts.remoteLength <= gapBegin || cts.remoteAddress >= gapBegin + kGap)
      << "the key's range overlaps the gap";

  // The rogue plays the unpack reply honestly: every byte arrives.
  ASSERT_EQ(cts.ringSegments, 0u);
  ASSERT_GT(cts.segmentSize, 0);
  std::vector<uint8_t> data = pattern(kBytes, 17);
  for (int64_t at = 0; at < kBytes; at += cts.segmentSize) {
    size_t length = static_cast<size_t>(std::min<int64_t>(cts.segmentSize, kBytes - at));
    Status wrote = rogue().writeWithImm(kVictim, std::span(data).subspan(static_cast<size_t>(at), length),
                                        cts.remoteAddress + static_cast<uint64_t>(at), cts.rkey, cts.receiverTransfer);
    ASSERT_TRUE(wrote.isOk()) << wrote.toString();
  }
  RecvInfo info;
  Status received = victim().wait(*recv, &info, Deadline::after(std::chrono::seconds(60)));
  ASSERT_TRUE(received.isOk()) << received.toString();
  for (size_t p = 0; p < static_cast<size_t>(kBytes); ++p) ASSERT_EQ(receive.at(p), data[p]) << "packed byte " << p;

  // The key the victim handed out reaches nothing of the gap.
  std::vector<uint8_t> forged(64, 0xF0);
  Status forgedWrite = rogue().writeWithImm(kVictim, forged, gapBegin + kGap / 2, cts.rkey, cts.receiverTransfer);
  EXPECT_EQ(forgedWrite.code(), Code::kRemoteAccess) << forgedWrite.toString();
  rogueFailed_ = true;  // a refused write breaks the rogue's link, as on an HCA
  EXPECT_TRUE(receive.gapIntact()) << "the gap between the blocks was written";
}

}  // namespace
}  // namespace ibdt::messaging::testing
