// transport/fabric/shm/activity.h — the activity summary of a domain
// (docs/many-ranks.md): which endpoints progress must visit.
//
// Before it, every progress() polled every connected endpoint's
// notification ring: with 127 connected peers, 127 cache lines per call
// even when nothing arrived. Now a peer that pushes a notification sets
// the receiving endpoint's bit in this bitmap (in the domain segment the
// peer maps) after the ring write (release); progress reads the bitmap
// (one cache line per 512 endpoints, only read while idle), clears a
// non-zero word (acquire) before draining the endpoints whose bits were
// set, so a notification pushed after the drain sets its bit again and is
// seen by the next progress: none is lost. Endpoints with sends waiting
// (for a receive of the peer, a bounce acknowledgement) are visited on
// every progress, as before; the completion queues also sweep all their
// endpoints once per half liveness interval (dead peers, a bit not set).
// The kHot endpoints that were active last are polled directly on every
// progress and their peers skip the bit (EndpointHeader::polledDirectly):
// a ping-pong with one peer costs what it did before the summary.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

namespace ibdt::fabric::shm {

class ShmEndpoint;

class ActivityBoard {
 public:
  // `words` is the bitmap in the domain segment (capacity bits).
  void bind(std::atomic<uint64_t>* words, uint32_t capacity);

  // The endpoint's bit, or kNoActivitySlot when all are taken (the
  // endpoint is then visited on every progress).
  uint32_t add(ShmEndpoint* endpoint);
  void remove(ShmEndpoint* endpoint, uint32_t slot);
  // The endpoint has sends waiting: visit it on every progress until it has none.
  void markBusy(ShmEndpoint* endpoint);
  // Sets the endpoint's own bit (work that arrived before it could drain it).
  void markActive(uint32_t slot);

  // Visits the endpoints with their bit set, the busy ones and those without a bit.
  void progress(std::chrono::steady_clock::time_point now);
  // progress() calls so far (a queue polled right after another's run skips its own).
  uint64_t runs() const { return runs_; }

 private:
  std::atomic<uint64_t>* words_ = nullptr;
  uint32_t capacity_ = 0;
  uint64_t runs_ = 0;
  uint32_t wordsInUse_ = 0;  // words up to the highest slot ever given
  std::vector<ShmEndpoint*> bySlot_;
  std::vector<uint32_t> freeSlots_;
  std::vector<ShmEndpoint*> busy_;
  std::vector<ShmEndpoint*> unsummarized_;
  std::vector<ShmEndpoint*> visiting_;  // scratch of progress()
  static constexpr size_t kHot = 4;
  std::array<ShmEndpoint*, kHot> hot_{};
  size_t nextVictim_ = 0;
  // Makes `endpoint` one of the directly polled ones, demoting the oldest.
  void promote(ShmEndpoint* endpoint, std::chrono::steady_clock::time_point now);
};

// Sender side: sets `slot` in a peer's bitmap of `capacity` bits, after the
// notification it announces is written (release).
inline void setActivityBit(std::atomic<uint64_t>* words, uint32_t capacity, uint32_t slot) {
  if (slot < capacity) words[slot / 64].fetch_or(uint64_t{1} << (slot % 64), std::memory_order_release);
}

}  // namespace ibdt::fabric::shm
