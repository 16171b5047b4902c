// transport/fabric/shm/registration_table.h — the registration table in the
// domain segment, written by its owner and checked by peers on every
// one-sided access.
//
// Each slot carries a seqlock word: even while free (zero-filled memory is a
// table of free slots), odd while a registration is live. Keys embed the odd
// value as their generation, so deregistration (which makes it even) stops
// every key issued for the slot at once, and a reused slot never honours an
// old key.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>

#include "ibdt/status.h"
#include "transport/fabric/shm/layout.h"

namespace ibdt::fabric::shm {

struct RegionSnapshot {
  uint32_t generation = 0;
  uint32_t access = 0;
  uint64_t address = 0;
  uint64_t length = 0;
  int32_t segmentFd = -1;
  uint64_t segmentInode = 0;
  uint64_t segmentOffset = 0;
  uint32_t segmentOwner = 0;
};

// Where a registration lies in provider-allocated memory (none: fd -1).
struct SegmentPlace {
  static constexpr uint32_t kSelf = UINT32_MAX;  // the entry being added owns the segment
  int32_t fd = -1;
  uint64_t inode = 0;
  uint64_t offset = 0;
  uint32_t owner = kSelf;
};

inline uint64_t makeRkey(uint32_t index, uint32_t generation) { return (uint64_t{generation} << 32) | index; }
inline uint32_t rkeyIndex(uint64_t rkey) { return static_cast<uint32_t>(rkey); }
inline uint32_t rkeyGeneration(uint64_t rkey) { return static_cast<uint32_t>(rkey >> 32); }
inline uint32_t makeLkey(uint32_t index, uint32_t generation) { return ((generation & 0xffffu) << 16) | index; }
inline uint32_t lkeyIndex(uint32_t lkey) { return lkey & 0xffffu; }
inline uint32_t lkeyGeneration(uint32_t lkey) { return lkey >> 16; }

// Consistent read of one slot; false when the slot is free or changed under us.
bool readRegion(const RegionEntry* table, uint32_t capacity, uint32_t index, RegionSnapshot& out);

// Releases the private copy of a table (anonymous memory).
struct UnmapEntries {
  size_t length = 0;
  void operator()(RegionEntry* entries) const;
};

// Owner side: hands out slots and publishes registrations. Every entry is
// written twice: into the shared table that peers check, and into a private
// copy that the owner checks its own keys against (local access, and the
// bounce requests it carries out for peers). Peers map the shared table
// writable (its segment also holds the doorbells and activity bits), so a
// hostile peer could rewrite an entry there; it cannot reach the copy.
class RegistrationTable {
 public:
  RegistrationTable(RegionEntry* shared, uint32_t capacity);

  // Publishes a registration; returns the slot index (generation via generation()).
  Result<uint32_t> add(uint64_t address, uint64_t length, uint32_t access, const SegmentPlace& segment = {});
  void remove(uint32_t index);
  uint32_t generation(uint32_t index) const;
  // The private copy, for readRegion: what this process registered.
  const RegionEntry* ownEntries() const { return own_.get(); }
  uint32_t capacity() const { return capacity_; }

 private:
  RegionEntry* shared_;
  std::unique_ptr<RegionEntry, UnmapEntries> own_;  // zero-filled pages, touched as slots are used
  uint32_t capacity_;
  uint32_t nextUnused_ = 0;
  std::deque<uint32_t> freed_;  // FIFO reuse keeps generations of a slot far apart in time
};

}  // namespace ibdt::fabric::shm
