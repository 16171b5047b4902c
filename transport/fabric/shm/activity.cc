#include "transport/fabric/shm/activity.h"

#include <algorithm>

#include "transport/fabric/shm/endpoint.h"
#include "transport/fabric/shm/layout.h"

namespace ibdt::fabric::shm {

void ActivityBoard::bind(std::atomic<uint64_t>* words, uint32_t capacity) {
  words_ = words;
  capacity_ = capacity;
  bySlot_.assign(capacity, nullptr);
  freeSlots_.clear();
  for (uint32_t slot = capacity; slot > 0; --slot) freeSlots_.push_back(slot - 1);
}

uint32_t ActivityBoard::add(ShmEndpoint* endpoint) {
  if (freeSlots_.empty()) {
    unsummarized_.push_back(endpoint);
    return kNoActivitySlot;
  }
  uint32_t slot = freeSlots_.back();
  freeSlots_.pop_back();
  bySlot_[slot] = endpoint;
  wordsInUse_ = std::max(wordsInUse_, slot / 64 + 1);
  // A bit left over from the slot's previous endpoint only costs a visit.
  return slot;
}

void ActivityBoard::remove(ShmEndpoint* endpoint, uint32_t slot) {
  busy_.erase(std::remove(busy_.begin(), busy_.end(), endpoint), busy_.end());
  visiting_.erase(std::remove(visiting_.begin(), visiting_.end(), endpoint), visiting_.end());
  std::replace(hot_.begin(), hot_.end(), endpoint, static_cast<ShmEndpoint*>(nullptr));
  if (slot >= capacity_) {
    unsummarized_.erase(std::remove(unsummarized_.begin(), unsummarized_.end(), endpoint), unsummarized_.end());
    return;
  }
  bySlot_[slot] = nullptr;
  freeSlots_.push_back(slot);
}

void ActivityBoard::markBusy(ShmEndpoint* endpoint) {
  if (std::find(busy_.begin(), busy_.end(), endpoint) == busy_.end()) busy_.push_back(endpoint);
}

void ActivityBoard::markActive(uint32_t slot) { setActivityBit(words_, capacity_, slot); }

void ActivityBoard::promote(ShmEndpoint* endpoint, std::chrono::steady_clock::time_point now) {
  if (std::find(hot_.begin(), hot_.end(), endpoint) != hot_.end()) return;
  ShmEndpoint* victim = hot_[nextVictim_];
  hot_[nextVictim_] = endpoint;
  nextVictim_ = (nextVictim_ + 1) % kHot;
  endpoint->setPolledDirectly(true, now);
  if (victim != nullptr) victim->setPolledDirectly(false, now);
}

void ActivityBoard::progress(std::chrono::steady_clock::time_point now) {
  ++runs_;
  visiting_.clear();
  for (uint32_t word = 0; word < wordsInUse_; ++word) {
    // Read first: while idle the line stays shared in our cache.
    if (words_[word].load(std::memory_order_relaxed) == 0) continue;
    // Cleared before the drains: a notification pushed after them sets it again.
    uint64_t bits = words_[word].exchange(0, std::memory_order_acquire);
    for (; bits != 0; bits &= bits - 1) {
      ShmEndpoint* endpoint = bySlot_[word * 64 + static_cast<uint32_t>(__builtin_ctzll(bits))];
      if (endpoint != nullptr) visiting_.push_back(endpoint);
    }
  }
  size_t fromBits = visiting_.size();
  for (ShmEndpoint* endpoint : hot_) {
    if (endpoint != nullptr) visiting_.push_back(endpoint);
  }
  visiting_.insert(visiting_.end(), busy_.begin(), busy_.end());
  visiting_.insert(visiting_.end(), unsummarized_.begin(), unsummarized_.end());
  for (ShmEndpoint* endpoint : visiting_) endpoint->progress(now);
  for (size_t i = 0; i < fromBits; ++i) promote(visiting_[i], now);
  busy_.erase(std::remove_if(busy_.begin(), busy_.end(), [](ShmEndpoint* e) { return !e->hasPendingSends(); }),
              busy_.end());
}

}  // namespace ibdt::fabric::shm
