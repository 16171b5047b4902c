#include "transport/fabric/shm/peer.h"

#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "base/log.h"
#include "transport/fabric/shm/activity.h"

namespace ibdt::fabric::shm {
PeerDomain::~PeerDomain() {
  if (pidfd_ >= 0) close(pidfd_);
}

Result<std::unique_ptr<PeerDomain>> PeerDomain::attach(pid_t pid, int domainFd, uint64_t domainInode) {
  std::unique_ptr<PeerDomain> peer(new PeerDomain());
  peer->pid_ = pid;
  peer->domainInode_ = domainInode;
  // A pidfd is immune to pid reuse; without one (old kernels) kill(pid, 0) is used.
  peer->pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (peer->pidfd_ < 0 && errno == ESRCH) {
    return makeError(Code::kPeerFailed, "shm: peer process ", pid, " does not exist");
  }
  IBDT_ASSIGN_OR_RETURN(peer->domain_, SharedRegion::openPeer(pid, domainFd, domainInode));
  if (peer->domain_.length() < sizeof(DomainHeader)) {
    return makeError(Code::kProtocol, "shm: domain segment of process ", pid, " is too small");
  }
  // One snapshot, checked and used: the peer can rewrite its header while we read it.
  const auto& shared = *reinterpret_cast<const DomainHeader*>(peer->domain_.data());
  const DomainHeader header{readOnce(shared.magic),           readOnce(shared.version),
                            readOnce(shared.pid),             readOnce(shared.regionCapacity),
                            readOnce(shared.doorbellCapacity), readOnce(shared.activityCapacity),
                            readOnce(shared.regionsOffset),   readOnce(shared.doorbellsOffset),
                            readOnce(shared.activityOffset)};
  // Without overflow: an offset near 2^64 must not wrap back inside the segment.
  const uint64_t length = peer->domain_.length();
  auto fits = [length](uint64_t offset, uint64_t bytes) { return offset <= length && bytes <= length - offset; };
  if (header.magic != kDomainMagic || header.version != kLayoutVersion ||
      !fits(header.regionsOffset, uint64_t{header.regionCapacity} * sizeof(RegionEntry)) ||
      !fits(header.doorbellsOffset, uint64_t{header.doorbellCapacity} * sizeof(Doorbell)) ||
      header.activityOffset % kCacheLine != 0 ||
      !fits(header.activityOffset, (uint64_t{header.activityCapacity} + 63) / 64 * sizeof(uint64_t))) {
    return makeError(Code::kProtocol, "shm: domain segment of process ", pid,
                     " has a foreign layout (magic/version/size mismatch: mixed ibdt builds?)");
  }
  peer->regions_ = reinterpret_cast<const RegionEntry*>(peer->domain_.data() + header.regionsOffset);
  peer->doorbells_ = reinterpret_cast<Doorbell*>(peer->domain_.data() + header.doorbellsOffset);
  peer->activity_ = reinterpret_cast<std::atomic<uint64_t>*>(peer->domain_.data() + header.activityOffset);
  peer->activityCapacity_ = header.activityCapacity;
  peer->regionCapacity_ = header.regionCapacity;
  peer->doorbellCapacity_ = header.doorbellCapacity;
  return peer;
}

bool PeerDomain::alive() const {
  if (pidfd_ >= 0) {
    pollfd entry{pidfd_, POLLIN, 0};
    return poll(&entry, 1, 0) == 0;
  }
  return kill(pid_, 0) == 0 || errno != ESRCH;
}

void PeerDomain::ring(uint32_t index) {
  if (index < doorbellCapacity_) ringDoorbell(doorbells_[index]);
}

void PeerDomain::markActive(uint32_t slot) { setActivityBit(activity_, activityCapacity_, slot); }

CompletionStatus PeerDomain::checkAccess(uint64_t rkey, uint64_t address, uint64_t length, uint32_t access,
                                         RemotePiece& piece) {
  RegionSnapshot region;
  uint32_t index = rkeyIndex(rkey);
  if (!readRegion(regions_, regionCapacity_, index, region) || region.generation != rkeyGeneration(rkey)) {
    return CompletionStatus::kRemoteAccess;  // unknown, deregistered or reused key
  }
  if ((region.access & access) != access) return CompletionStatus::kRemoteAccess;
  if (address < region.address || address - region.address > region.length ||
      length > region.length - (address - region.address)) {
    return CompletionStatus::kRemoteAccess;
  }
  piece.address = address;
  piece.length = length;
  piece.mapped = region.segmentFd >= 0 ? mapSegment(region, address, length) : nullptr;
  if (region.segmentFd >= 0 && piece.mapped == nullptr) return CompletionStatus::kRemoteOperation;
  return CompletionStatus::kSuccess;
}

CompletionStatus PeerDomain::resolveReceive(uint32_t regionIndex, uint64_t address, uint64_t length,
                                            RemotePiece& piece) {
  RegionSnapshot region;
  if (!readRegion(regions_, regionCapacity_, regionIndex, region)) {
    return CompletionStatus::kRemoteOperation;  // the peer deregistered a posted receive buffer
  }
  piece.address = address;
  piece.length = length;
  piece.mapped = region.segmentFd >= 0 ? mapSegment(region, address, length) : nullptr;
  if (region.segmentFd >= 0 && piece.mapped == nullptr) return CompletionStatus::kRemoteOperation;
  return CompletionStatus::kSuccess;
}

uint8_t* PeerDomain::mapSegment(const RegionSnapshot& region, uint64_t address, uint64_t length) {
  auto found = segments_.find(region.segmentInode);
  if (found == segments_.end()) {
    // Unmap segments whose registration is gone (the peer freed them), so
    // freed memory does not stay alive in this process.
    for (auto it = segments_.begin(); it != segments_.end();) {
      RegionSnapshot current;
      bool live = readRegion(regions_, regionCapacity_, it->second.regionIndex, current) &&
                  current.segmentInode == it->first;
      it = live ? std::next(it) : segments_.erase(it);
    }
    auto segment = SharedRegion::openPeer(pid_, region.segmentFd, region.segmentInode);
    if (!segment.isOk()) {
      IBDT_LOG(kWarn, "shm: cannot map a segment of process ", pid_, ": ", segment.status().toString());
      return nullptr;
    }
    // Kept while the allocation's own entry lives: a pool buffer's entry
    // goes with each hand-out, the chunk's mapping should not.
    found = segments_.emplace(region.segmentInode, Mapped{std::move(segment).value(), region.segmentOwner}).first;
  }
  // Never trust the peer's table beyond the mapping: the piece must lie inside it.
  // A registration of part of the segment starts at segmentOffset in it.
  size_t mapped = found->second.segment.length();
  if (address < region.address || region.segmentOffset > mapped) return nullptr;
  uint64_t inside = address - region.address;
  if (inside > mapped - region.segmentOffset) return nullptr;
  uint64_t offset = region.segmentOffset + inside;
  if (length > mapped - offset) return nullptr;
  return found->second.segment.data() + offset;
}

void ringDoorbell(Doorbell& doorbell) {
  // Dekker with the sleeper (ShmCompletionQueue::wait): it counts itself in
  // `sleepers`, fences, then looks for work; we published the work, fence,
  // then look for sleepers. One of us sees the other, so with nobody asleep
  // the doorbell line is only read: a busy-polling peer's cache keeps it and
  // a ping-pong pays no cross-core write per message.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (doorbell.sleepers.load(std::memory_order_relaxed) != 0) {
    doorbell.sequence.fetch_add(1, std::memory_order_seq_cst);
    syscall(SYS_futex, &doorbell.sequence, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  }
}

void sleepOnDoorbell(Doorbell& doorbell, uint32_t seen, std::chrono::nanoseconds timeout) {
  timespec span{static_cast<time_t>(timeout.count() / 1'000'000'000), static_cast<long>(timeout.count() % 1'000'000'000)};
  syscall(SYS_futex, &doorbell.sequence, FUTEX_WAIT, seen, &span, nullptr, 0);
}

}  // namespace ibdt::fabric::shm
