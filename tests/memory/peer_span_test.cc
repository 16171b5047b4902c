// The bound on what one key handed to a peer may span beyond its data
// (transport/memory/peer_span.h, issue 17).
#include "transport/memory/peer_span.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>

namespace ibdt::memory {
namespace {

constexpr int64_t kKiB = 1024;

TEST(PeerSpan, SmallDataMaySpanItsSlack) {
  EXPECT_EQ(maxPeerSpan(0), 64 * kKiB);
  EXPECT_EQ(maxPeerSpan(8 * kKiB), 72 * kKiB);
  EXPECT_TRUE(checkPeerSpan(72 * kKiB, 8 * kKiB).isOk());
  EXPECT_EQ(checkPeerSpan(72 * kKiB + 1, 8 * kKiB).code(), Code::kUnsupported);
}

TEST(PeerSpan, LargeDataMaySpanFourTimesItself) {
  EXPECT_EQ(maxPeerSpan(1 << 20), 4 << 20);
  EXPECT_TRUE(checkPeerSpan(4 << 20, 1 << 20).isOk());
  EXPECT_EQ(checkPeerSpan((4 << 20) + 1, 1 << 20).code(), Code::kUnsupported);
}

TEST(PeerSpan, TheErrorNamesTheSpanTheDataAndTheBound) {
  // Two 4 KiB blocks 1 GiB apart: what a struct over separate buffers spans.
  int64_t span = (int64_t{1} << 30) + 4 * kKiB;
  Status status = checkPeerSpan(span, 8 * kKiB);
  ASSERT_EQ(status.code(), Code::kUnsupported);
  for (const std::string& needle : {std::to_string(span) + "-byte span", std::string("8192 bytes of data"),
                                    std::string("at most 73728 bytes")}) {
    EXPECT_NE(status.message().find(needle), std::string_view::npos) << status.toString();
  }
}

TEST(PeerSpan, HugeSizesDoNotOverflow) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(maxPeerSpan(kMax), kMax);
  EXPECT_EQ(maxPeerSpan(kMax / 2), kMax);
  EXPECT_TRUE(checkPeerSpan(kMax, kMax / 3).isOk());
  EXPECT_EQ(maxPeerSpan(-5), 64 * kKiB);  // a negative size is treated as none
}

}  // namespace
}  // namespace ibdt::memory
