#include "transport/fabric/shm/registration_table.h"

namespace ibdt::fabric::shm {

bool readRegion(const RegionEntry* table, uint32_t capacity, uint32_t index, RegionSnapshot& out) {
  if (index >= capacity) return false;
  const RegionEntry& entry = table[index];
  uint32_t before = entry.sequence.load(std::memory_order_acquire);
  if ((before & 1u) == 0) return false;
  out.generation = before;
  out.access = entry.access.load(std::memory_order_relaxed);
  out.address = entry.address.load(std::memory_order_relaxed);
  out.length = entry.length.load(std::memory_order_relaxed);
  out.segmentFd = entry.segmentFd.load(std::memory_order_relaxed);
  out.segmentInode = entry.segmentInode.load(std::memory_order_relaxed);
  out.segmentOffset = entry.segmentOffset.load(std::memory_order_relaxed);
  out.segmentOwner = entry.segmentOwner.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  return entry.sequence.load(std::memory_order_relaxed) == before;
}

RegistrationTable::RegistrationTable(RegionEntry* entries, uint32_t capacity) : entries_(entries), capacity_(capacity) {}

Result<uint32_t> RegistrationTable::add(uint64_t address, uint64_t length, uint32_t access,
                                        const SegmentPlace& segment) {
  uint32_t index;
  if (!freed_.empty()) {
    index = freed_.front();
    freed_.pop_front();
  } else if (nextUnused_ < capacity_) {
    index = nextUnused_++;
  } else {
    return makeError(Code::kResource, "shm registration table is full (", capacity_, " regions registered)");
  }
  RegionEntry& entry = entries_[index];
  uint32_t sequence = entry.sequence.load(std::memory_order_relaxed);  // even: free
  // Seqlock writer: a reader that sees any field below also sees the even
  // sequence stored when the slot was freed.
  std::atomic_thread_fence(std::memory_order_release);
  entry.access.store(access, std::memory_order_relaxed);
  entry.address.store(address, std::memory_order_relaxed);
  entry.length.store(length, std::memory_order_relaxed);
  entry.segmentFd.store(segment.fd, std::memory_order_relaxed);
  entry.segmentInode.store(segment.inode, std::memory_order_relaxed);
  entry.segmentOffset.store(segment.offset, std::memory_order_relaxed);
  entry.segmentOwner.store(segment.owner == SegmentPlace::kSelf ? index : segment.owner, std::memory_order_relaxed);
  entry.sequence.store(sequence + 1, std::memory_order_release);
  return index;
}

void RegistrationTable::remove(uint32_t index) {
  RegionEntry& entry = entries_[index];
  entry.sequence.store(entry.sequence.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  freed_.push_back(index);
}

uint32_t RegistrationTable::generation(uint32_t index) const {
  return entries_[index].sequence.load(std::memory_order_relaxed);
}

}  // namespace ibdt::fabric::shm
