#include "transport/fabric/shm/registration_table.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "base/log.h"

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

namespace {

// Seqlock writer: a reader that sees any field also sees the even sequence
// stored when the slot was freed.
void publish(RegionEntry& entry, uint32_t index, uint64_t address, uint64_t length, uint32_t access,
             const SegmentPlace& segment) {
  uint32_t sequence = entry.sequence.load(std::memory_order_relaxed);  // even: free
  std::atomic_thread_fence(std::memory_order_release);
  entry.access.store(access, std::memory_order_relaxed);
  entry.address.store(address, std::memory_order_relaxed);
  entry.length.store(length, std::memory_order_relaxed);
  entry.segmentFd.store(segment.fd, std::memory_order_relaxed);
  entry.segmentInode.store(segment.inode, std::memory_order_relaxed);
  entry.segmentOffset.store(segment.offset, std::memory_order_relaxed);
  entry.segmentOwner.store(segment.owner == SegmentPlace::kSelf ? index : segment.owner, std::memory_order_relaxed);
  entry.sequence.store(sequence + 1, std::memory_order_release);
}

void retire(RegionEntry& entry) {
  entry.sequence.store(entry.sequence.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

}  // namespace

void UnmapEntries::operator()(RegionEntry* entries) const { munmap(entries, length); }

RegistrationTable::RegistrationTable(RegionEntry* shared, uint32_t capacity) : shared_(shared), capacity_(capacity) {
  if (capacity == 0) return;
  // Anonymous zero-filled memory, like the shared table: every slot starts
  // free, and only the pages of slots in use are ever touched.
  size_t length = sizeof(RegionEntry) * capacity;
  void* mapped = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapped == MAP_FAILED) {
    capacity_ = 0;  // add() then reports the table full, with the reason logged here
    IBDT_LOG(kError, "shm: cannot map the private registration table (", length, " bytes): ", std::strerror(errno));
    return;
  }
  own_ = std::unique_ptr<RegionEntry, UnmapEntries>(static_cast<RegionEntry*>(mapped), UnmapEntries{length});
}

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
  // The copy first: a peer can act on the shared entry as soon as it is published.
  publish(own_.get()[index], index, address, length, access, segment);
  publish(shared_[index], index, address, length, access, segment);
  return index;
}

void RegistrationTable::remove(uint32_t index) {
  retire(shared_[index]);
  retire(own_.get()[index]);
  freed_.push_back(index);
}

uint32_t RegistrationTable::generation(uint32_t index) const {
  return own_.get()[index].sequence.load(std::memory_order_relaxed);
}

}  // namespace ibdt::fabric::shm
