// shm only: a peer's memfd segment is mapped through /proc/<pid>/fd and,
// where /proc hides it, through pidfd_getfd(); both see and change the same
// bytes, and a wrong inode (a closed and reused descriptor) is refused.
// Segments of pool-chunk size arrive faulted in, on both sides.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include <gtest/gtest.h>

#include "fabric_harness.h"
#include "base/shared_region.h"

namespace ibdt::fabric::testing {
namespace {

using ibdt::SharedRegion;

struct Advert {
  int fd;
  uint64_t inode;
};

TEST(ShmSegment, PeerMapsBothWaysAndRejectsAWrongInode) {
  constexpr size_t kLength = 3 * 4096 + 10;
  int toParent[2], toChild[2];
  ASSERT_EQ(pipe(toParent), 0);
  ASSERT_EQ(pipe(toChild), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto segment = SharedRegion::create("segment-test", kLength);
    if (!segment.isOk()) _exit(2);
    fillPattern(segment->data(), kLength, 5);
    Advert advert{segment->fd(), segment->inode()};
    if (write(toParent[1], &advert, sizeof advert) != sizeof advert) _exit(3);
    char done = 0;
    if (read(toChild[0], &done, 1) != 1) _exit(4);
    // The parent wrote pattern 6 through its mapping.
    _exit(firstMismatch(segment->data(), kLength, 6) == -1 ? 0 : 1);
  }
  Advert advert{};
  ASSERT_EQ(read(toParent[0], &advert, sizeof advert), static_cast<ssize_t>(sizeof advert));
  auto viaProc = SharedRegion::openPeer(child, advert.fd, advert.inode);
  ASSERT_TRUE(viaProc.isOk()) << viaProc.status().toString();
  auto viaPidfd = SharedRegion::openPeerByPidfd(child, advert.fd, advert.inode);
  ASSERT_TRUE(viaPidfd.isOk()) << viaPidfd.status().toString();
  ASSERT_GE(viaProc->length(), kLength);
  EXPECT_EQ(firstMismatch(viaProc->data(), kLength, 5), -1);
  EXPECT_EQ(firstMismatch(viaPidfd->data(), kLength, 5), -1);
  fillPattern(viaPidfd->data(), kLength, 6);
  EXPECT_EQ(firstMismatch(viaProc->data(), kLength, 6), -1) << "both mappings are the same memory";
  EXPECT_EQ(SharedRegion::openPeer(child, advert.fd, advert.inode + 1).status().code(), Code::kProtocol);
  EXPECT_EQ(SharedRegion::openPeerByPidfd(child, advert.fd, advert.inode + 1).status().code(), Code::kProtocol);
  char done = 1;
  ASSERT_EQ(write(toChild[1], &done, 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "wait status " << status;
  // The owner is gone: its segments cannot be reached any more.
  EXPECT_TRUE(SharedRegion::openPeer(child, advert.fd, advert.inode).status().isError());
  for (int fd : {toParent[0], toParent[1], toChild[0], toChild[1]}) close(fd);
}

long minorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Writes one byte per page (page number + seed); returns the minor page faults that took.
// Uninstrumented: under AddressSanitizer each checked store also reads the
// shadow of its page, whose first touch is a fault of its own (32 for 1 MiB).
__attribute__((no_sanitize_address)) long faultsToTouch(uint8_t* data, size_t length, int seed) {
  const long before = minorFaults();
  for (size_t at = 0; at < length; at += 4096) data[at] = static_cast<uint8_t>(at / 4096 + seed);
  return minorFaults() - before;
}

TEST(ShmSegment, PoolSizedSegmentsArriveFaultedInOnBothSides) {
  // A pool chunk holds eager buffers a peer writes into: without this, the
  // first message into each of their pages paid a fault on both sides.
  constexpr size_t kLength = size_t{1} << 20;
  constexpr size_t kPages = kLength / 4096;
  auto segment = SharedRegion::create("populate-test", kLength);
  ASSERT_TRUE(segment.isOk()) << segment.status().toString();
  EXPECT_LT(faultsToTouch(segment->data(), kLength, 0), static_cast<long>(kPages / 16)) << "the owner's mapping";
  auto peer = SharedRegion::openPeer(getpid(), segment->fd(), segment->inode());
  ASSERT_TRUE(peer.isOk()) << peer.status().toString();
  EXPECT_LT(faultsToTouch(peer->data(), kLength, 1), static_cast<long>(kPages / 16)) << "the peer's mapping";
  // One memory: what the peer wrote last is what the owner reads.
  for (size_t at = 0; at < kLength; at += 4096) {
    ASSERT_EQ(segment->data()[at], static_cast<uint8_t>(at / 4096 + 1)) << "page " << at / 4096;
  }
}

}  // namespace
}  // namespace ibdt::fabric::testing
