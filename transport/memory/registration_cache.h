// transport/memory/registration_cache.h — the pin-down cache.
//
// Registering memory costs microseconds (the kernel pins every page), so a
// buffer sent from again and again should be registered once. The cache keeps
// registrations in an interval index after their users
// are done with them, and hands them out again to any request the range
// covers with the access flags it needs. Ranges a peer gets a key for
// (remote read or write) are the exact bytes asked for, so the key reaches
// no byte beside them; local-only ranges are whole pages (docs/security.md).
//
//   * Indexed ranges never overlap: a miss that overlaps cached ranges
//     registers their union (all of it was mapped when they were made) and
//     retires the old ones, so a lookup is one ordered-map search.
//   * Reference counted: a registration in use (a live RegionRef) is never
//     evicted or deregistered; it is retired from the index instead and
//     deregistered when its last user lets go.
//   * Bounded: unreferenced registrations are evicted least recently used
//     first while the pinned bytes or regions exceed the limits.
//   * Never stale: unmap events (unmap_events.h) retire every overlapping
//     registration before the memory can be mapped again. The event handler
//     only queues the range (it may run inside munmap on any thread); the
//     queue is applied under the cache lock at the start of every call.
//   * Safe by default: in mode auto, the cache caches only when it can see
//     unmaps (munmap interception is active and glibc accepted
//     retainHeapMemory()); otherwise every acquire registers and every release
//     deregisters.
//
// Thread-safe: every member may be called from any thread. The provider is
// never called with the cache lock held.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ibdt/fabric.h"
#include "ibdt/status.h"
#include "transport/memory/page_range.h"
#include "transport/memory/provider_lock.h"
#include "transport/memory/unmap_events.h"

namespace ibdt::memory {

struct CacheOptions {
  enum class Mode : uint8_t {
    kAuto,  // cache when unmaps are visible, else register per use
    kOn,    // cache even when they are not (the application reports unmaps)
    kOff,   // register per use
  };
  Mode mode = Mode::kAuto;
  uint64_t maxBytes = uint64_t{1} << 30;  // pinned bytes kept
  uint64_t maxRegions = 4096;             // registrations kept

  // IBDT_REG_CACHE, IBDT_REG_CACHE_MAX_BYTES, IBDT_REG_CACHE_MAX_REGIONS.
  static Result<CacheOptions> fromEnvironment();
};

struct CacheCounters {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t evictions = 0;      // unreferenced registrations dropped for the limits
  uint64_t invalidations = 0;  // registrations retired by unmap events or invalidate()
  uint64_t registrations = 0;  // calls to Domain::registerMemory that succeeded
  uint64_t failures = 0;       // calls to Domain::registerMemory that failed
  uint64_t pinnedBytes = 0;    // registered now (cached or in use)
  uint64_t pinnedRegions = 0;
};

// "hits=… misses=… …" for logs, IBDT_STATS and tools.
std::string describe(const CacheCounters& counters);

class RegistrationCache;
struct CacheEntry;

// A registration in use. Move-only; releasing it (reset or destruction) lets
// the cache keep, evict or deregister it. Must not outlive its cache.
class RegionRef {
 public:
  RegionRef() = default;
  RegionRef(RegionRef&& other) noexcept { *this = std::move(other); }
  RegionRef& operator=(RegionRef&& other) noexcept;
  ~RegionRef() { reset(); }

  explicit operator bool() const { return region_ != nullptr; }
  const fabric::MemoryRegion& region() const { return *region_; }
  uint32_t lkey() const { return region_->lkey(); }
  uint64_t rkey() const { return region_->rkey(); }
  void reset();

 private:
  friend class RegistrationCache;
  const fabric::MemoryRegion* region_ = nullptr;
  RegistrationCache* cache_ = nullptr;
  CacheEntry* entry_ = nullptr;
  std::unique_ptr<fabric::MemoryRegion> owned_;  // pass-through mode: a registration for this use only
};

class RegistrationCache final : private UnmapListener {
 public:
  static Result<std::unique_ptr<RegistrationCache>> create(fabric::Domain& domain, const CacheOptions& options);
  ~RegistrationCache() override;
  RegistrationCache(const RegistrationCache&) = delete;
  RegistrationCache& operator=(const RegistrationCache&) = delete;

  // A registration that covers [address, address + length) and grants
  // exactly `access` (whole pages, possibly the union with earlier cached
  // ranges of the same access). Fails like Domain::registerMemory (e.g. unmapped pages),
  // with kInvalidArgument for a zero length and kOverflow when the range wraps.
  Result<RegionRef> acquire(const void* address, size_t length, uint32_t access);

  // Retires every registration overlapping the range (this cache only; see
  // ibdt::memory::invalidateRegistrations for all of them).
  void invalidate(const void* address, size_t length);
  // Deregisters every registration not in use.
  void flush();

  // Applies queued unmap events first, so the counts are current.
  CacheCounters counters();
  // False in pass-through mode (every acquire registers).
  bool caching() const { return caching_; }
  // Why the cache is or is not caching, for ibdt-info and logs.
  const std::string& modeDescription() const { return modeDescription_; }

 private:
  RegistrationCache(fabric::Domain& domain, const CacheOptions& options, bool caching, std::string description);
  friend class RegionRef;
  using IndexKey = std::pair<uint32_t, uintptr_t>;  // (access, range.begin)
  using Index = std::map<IndexKey, CacheEntry*>;

  void release(CacheEntry* entry);
  CacheEntry* findLocked(PageRange wanted, uint32_t access) const;
  void onUnmap(uintptr_t begin, uintptr_t end) noexcept override;

  using DeadList = std::vector<CacheEntry*>;
  // Everything below with a "Locked" suffix runs with mutex_ held and moves
  // entries to deregister into `dead`, which the caller destroys unlocked.
  void applyUnmapEventsLocked(DeadList& dead);
  // Every access class, or only `access` when given.
  void retireOverlappingLocked(PageRange range, DeadList& dead, bool countAsInvalidation,
                               std::optional<uint32_t> access = std::nullopt);
  void retireOverlappingInClassLocked(uint32_t access, PageRange range, DeadList& dead, bool countAsInvalidation);
  // The first indexed entry of `access` that overlaps `range`, or end.
  Index::iterator firstOverlapLocked(uint32_t access, PageRange range);
  void retireLocked(CacheEntry* entry, DeadList& dead);
  void evictLocked(DeadList& dead);
  void lruRemoveLocked(CacheEntry* entry);
  void lruPushLocked(CacheEntry* entry);
  void destroy(DeadList& dead);
  // What an acquire registers: the exact bytes when peers get the key, whole pages otherwise.
  PageRange rangeToRegister(const void* address, size_t length, uint32_t access) const;
  Result<std::unique_ptr<fabric::MemoryRegion>> registerRange(PageRange range, uint32_t access);

  fabric::Domain& domain_;
  std::mutex& providerLock_;  // held for every call into domain_
  const CacheOptions options_;
  const size_t pageSize_;
  const bool caching_;
  const std::string modeDescription_;
  bool printStats_ = false;  // IBDT_STATS, read at creation

  std::mutex mutex_;
  // By (access, range.begin): ranges of one access are disjoint. Entries of
  // different access never merge, so a hit grants exactly the access asked
  // for, as a fresh registration would (issue 17: a read-only acquire once
  // returned a writable union).
  Index index_;
  std::vector<CacheEntry*> registering_;    // misses being registered (unlocked)
  CacheEntry* lruHead_ = nullptr;           // unreferenced indexed entries, oldest first
  CacheEntry* lruTail_ = nullptr;
  CacheCounters counters_;

  // The hull of every range indexed or being registered since the cache was
  // last empty: unmaps outside it are ignored without queueing. Only grows
  // (under mutex_, before registration starts); reset when nothing is cached.
  std::atomic<uintptr_t> hullBegin_{UINTPTR_MAX};
  std::atomic<uintptr_t> hullEnd_{0};
  void growHullLocked(PageRange range);

  // Unmap events, queued by onUnmap() without taking mutex_.
  static constexpr size_t kMaxQueuedEvents = 256;
  std::atomic_flag eventLock_ = ATOMIC_FLAG_INIT;
  std::atomic<bool> eventsPending_{false};
  PageRange events_[kMaxQueuedEvents];
  size_t eventCount_ = 0;
  bool eventOverflow_ = false;  // too many queued: retire everything
};

}  // namespace ibdt::memory
