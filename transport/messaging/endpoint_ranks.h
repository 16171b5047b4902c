// transport/messaging/endpoint_ranks.h — which rank an endpoint id (the
// Completion::endpointId of the provider) belongs to.
//
// Looked up for every completion, so it is an open-addressing table over a
// power of two with a multiplicative hash rather than a std::unordered_map,
// which divides by a prime on every lookup. Ids are provider-chosen (shm numbers its endpoints, verbs uses QP
// numbers), so they are hashed, not used as indices. Entries are never
// removed: a context maps at most one endpoint pair per peer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ibdt::messaging {

class EndpointRanks {
 public:
  // Maps `id` to `rank`, replacing an earlier mapping of `id`.
  void set(uint32_t id, int rank) {
    if (2 * (used_ + 1) > slots_.size()) grow();
    Slot& slot = slots_[indexOf(slots_, id)];
    if (!slot.used) ++used_;
    slot = Slot{id, rank, true};
  }

  // The rank of `id`, or null when it was never set.
  const int* find(uint32_t id) const {
    if (slots_.empty()) return nullptr;
    const Slot& slot = slots_[indexOf(slots_, id)];
    return slot.used ? &slot.rank : nullptr;
  }

  size_t size() const { return used_; }

 private:
  struct Slot {
    uint32_t id = 0;
    int rank = 0;
    bool used = false;
  };

  // The slot holding `id`, or the free slot where it would go (the table
  // is never more than half full, so one exists).
  static size_t indexOf(const std::vector<Slot>& slots, uint32_t id) {
    const size_t mask = slots.size() - 1;
    size_t at = static_cast<size_t>((uint64_t{id} * 0x9e3779b97f4a7c15ULL) >> 32) & mask;
    while (slots[at].used && slots[at].id != id) at = (at + 1) & mask;
    return at;
  }

  void grow() {
    std::vector<Slot> bigger(slots_.empty() ? 16 : 2 * slots_.size());
    for (const Slot& slot : slots_) {
      if (slot.used) bigger[indexOf(bigger, slot.id)] = slot;
    }
    slots_.swap(bigger);
  }

  std::vector<Slot> slots_;  // size 0 or a power of two
  size_t used_ = 0;
};

}  // namespace ibdt::messaging
