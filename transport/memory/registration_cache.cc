#include "transport/memory/registration_cache.h"

#include <algorithm>
#include <utility>

#include "base/backoff.h"
#include "base/config.h"
#include "base/log.h"

namespace ibdt::memory {

struct CacheEntry {
  PageRange range;
  uint32_t access = 0;
  std::unique_ptr<fabric::MemoryRegion> region;
  uint32_t refs = 0;
  bool indexed = false;  // in index_ (may be handed out again)
  bool stale = false;    // unmapped while being registered
  CacheEntry* lruPrev = nullptr;
  CacheEntry* lruNext = nullptr;
  bool inLru = false;
};

Result<CacheOptions> CacheOptions::fromEnvironment() {
  CacheOptions options;
  IBDT_ASSIGN_OR_RETURN(int mode, config::getChoice("IBDT_REG_CACHE", {"auto", "on", "off"}));
  options.mode = static_cast<Mode>(mode);
  IBDT_ASSIGN_OR_RETURN(options.maxBytes, config::getSize("IBDT_REG_CACHE_MAX_BYTES"));
  IBDT_ASSIGN_OR_RETURN(int64_t regions, config::getInt("IBDT_REG_CACHE_MAX_REGIONS", 1, int64_t{1} << 32));
  options.maxRegions = static_cast<uint64_t>(regions);
  return options;
}

std::string describe(const CacheCounters& c) {
  return strCat("hits=", c.hits, " misses=", c.misses, " evictions=", c.evictions, " invalidations=", c.invalidations,
                " registrations=", c.registrations, " failures=", c.failures, " pinned=", c.pinnedBytes, "B/",
                c.pinnedRegions, " regions");
}

RegionRef& RegionRef::operator=(RegionRef&& other) noexcept {
  if (this != &other) {
    reset();
    region_ = std::exchange(other.region_, nullptr);
    cache_ = std::exchange(other.cache_, nullptr);
    entry_ = std::exchange(other.entry_, nullptr);
    owned_ = std::move(other.owned_);
  }
  return *this;
}

void RegionRef::reset() {
  if (entry_ != nullptr) cache_->release(entry_);
  if (owned_ != nullptr) destroyRegion(cache_->providerLock_, std::move(owned_));
  region_ = nullptr;
  cache_ = nullptr;
  entry_ = nullptr;
}

Result<std::unique_ptr<RegistrationCache>> RegistrationCache::create(fabric::Domain& domain,
                                                                     const CacheOptions& options) {
  // Checked here, not at exit: IBDT_STATS=garbage is an error, never silently off.
  IBDT_ASSIGN_OR_RETURN(bool printStats, config::getBool("IBDT_STATS"));
  bool caching = false;
  std::string description;
  switch (options.mode) {
    case CacheOptions::Mode::kOff:
      description = "off (IBDT_REG_CACHE=off): every transfer registers its memory";
      break;
    case CacheOptions::Mode::kOn:
      caching = true;
      description = retainHeapMemory() && unmapInterceptionActive()
                        ? "on: unmaps intercepted, glibc heap retained"
                        : "on (forced): some unmaps may be invisible; the application must report them";
      break;
    case CacheOptions::Mode::kAuto: {
      bool heap = retainHeapMemory();
      bool intercepted = unmapInterceptionActive();
      caching = heap && intercepted;
      if (caching) {
        description = "on: unmaps intercepted, glibc heap retained";
      } else {
        description = strCat("pass-through: ", intercepted ? "" : "munmap is not routed through ibdt; ",
                             heap ? "" : "malloc refused to retain freed memory; ",
                             "every transfer registers its memory (IBDT_REG_CACHE=on forces caching)");
        log::once(log::Level::kInfo, "reg-cache-pass-through", strCat("registration cache ", description));
      }
      break;
    }
  }
  std::unique_ptr<RegistrationCache> cache(new RegistrationCache(domain, options, caching, std::move(description)));
  cache->printStats_ = printStats;
  if (caching) IBDT_RETURN_IF_ERROR(addUnmapListener(cache.get()));
  return cache;
}

RegistrationCache::RegistrationCache(fabric::Domain& domain, const CacheOptions& options, bool caching,
                                     std::string description)
    : domain_(domain),
      providerLock_(providerLock(domain)),
      options_(options),
      pageSize_(domain.caps().pageSize),
      caching_(caching),
      modeDescription_(std::move(description)) {}

RegistrationCache::~RegistrationCache() {
  if (caching_) removeUnmapListener(this);
  if (printStats_) log::write(log::Level::kInfo, strCat("registration cache: ", describe(counters())));
  DeadList dead;
  uint64_t inUse = 0;
  {
    std::lock_guard lock(mutex_);
    while (lruHead_ != nullptr) retireLocked(lruHead_, dead);
    inUse = counters_.pinnedRegions;  // indexed or retired, still referenced
  }
  if (inUse > 0) {
    // Deregistering memory a transfer still uses would fault it; leak instead.
    IBDT_LOG(kError, "registration cache destroyed with ", inUse, " registrations still in use; leaking them");
  }
  destroy(dead);
}

PageRange RegistrationCache::rangeToRegister(const void* address, size_t length, uint32_t access) const {
  // A key a peer may use reaches exactly the bytes asked for (an 8-byte
  // receive must not expose its page); memory only we access is registered
  // by whole pages, which is what gets pinned anyway and what makes hits
  // likely.
  if ((access & (fabric::kRemoteRead | fabric::kRemoteWrite)) != 0) {
    auto begin = reinterpret_cast<uintptr_t>(address);
    return {begin, begin + length};
  }
  return pagesOf(address, length, pageSize_);
}

Result<std::unique_ptr<fabric::MemoryRegion>> RegistrationCache::registerRange(PageRange range, uint32_t access) {
  Result<std::unique_ptr<fabric::MemoryRegion>> region = Status(Code::kInternal, "not registered");
  {
    std::lock_guard provider(providerLock_);
    region = domain_.registerMemory(reinterpret_cast<void*>(range.begin), range.bytes(), access);
  }
  std::lock_guard lock(mutex_);
  ++(region.isOk() ? counters_.registrations : counters_.failures);
  return region;
}

CacheEntry* RegistrationCache::findLocked(PageRange wanted, uint32_t access) const {
  auto it = index_.upper_bound({access, wanted.begin});
  if (it == index_.begin()) return nullptr;
  auto [key, candidate] = *std::prev(it);
  return key.first == access && candidate->range.contains(wanted) ? candidate : nullptr;
}

RegistrationCache::Index::iterator RegistrationCache::firstOverlapLocked(uint32_t access, PageRange range) {
  auto it = index_.upper_bound({access, range.begin});
  if (it != index_.begin()) {
    auto before = std::prev(it);
    if (before->first.first == access && before->second->range.end > range.begin) return before;
  }
  return it;
}

Result<RegionRef> RegistrationCache::acquire(const void* address, size_t length, uint32_t access) {
  if (length == 0) return makeError(Code::kInvalidArgument, "registration cache: zero-length range at ", address);
  if (wrapsAround(address, length, pageSize_)) {
    return makeError(Code::kOverflow, "registration cache: range ", address, " + ", length, " wraps around");
  }
  PageRange wanted = rangeToRegister(address, length, access);
  RegionRef ref;

  if (!caching_) {
    {
      std::lock_guard lock(mutex_);
      ++counters_.misses;
    }
    IBDT_ASSIGN_OR_RETURN(ref.owned_, registerRange(wanted, access));
    ref.region_ = ref.owned_.get();
    ref.cache_ = this;
    return ref;
  }

  DeadList dead;
  auto entry = std::make_unique<CacheEntry>();
  entry->range = wanted;
  entry->access = access;
  {
    std::lock_guard lock(mutex_);
    applyUnmapEventsLocked(dead);
    if (CacheEntry* hit = findLocked(wanted, access)) {
      ++counters_.hits;
      if (hit->refs++ == 0) lruRemoveLocked(hit);
      ref.cache_ = this;
      ref.entry_ = hit;
      ref.region_ = hit->region.get();
    } else {
      // A miss: register the union of everything of the same access it overlaps.
      ++counters_.misses;
      for (auto it = firstOverlapLocked(access, wanted);
           it != index_.end() && it->first.first == access && it->second->range.begin < wanted.end; ++it) {
        entry->range.begin = std::min(entry->range.begin, it->second->range.begin);
        entry->range.end = std::max(entry->range.end, it->second->range.end);
      }
      registering_.push_back(entry.get());
      growHullLocked(entry->range);
    }
  }
  destroy(dead);
  if (ref) return ref;

  auto region = registerRange(entry->range, entry->access);
  if (!region.isOk() && entry->range.bytes() != wanted.bytes()) {
    // The cached neighbours cover memory that is no longer mapped: an unmap
    // nobody reported. Register just what was asked for; the neighbours are
    // retired below because they overlap it.
    IBDT_LOG(kDebug, "registration cache: union [", reinterpret_cast<void*>(entry->range.begin), ", +",
             entry->range.bytes(), ") failed (", region.status().message(), "); registering the requested range");
    entry->range = wanted;
    entry->access = access;
    region = registerRange(wanted, access);
  }
  {
    std::lock_guard lock(mutex_);
    registering_.erase(std::find(registering_.begin(), registering_.end(), entry.get()));
    if (!region.isOk()) {
      Status status = std::move(region).takeStatus();
      return status.withContext(strCat("registration cache: registering [", reinterpret_cast<void*>(entry->range.begin),
                                       ", +", entry->range.bytes(), ")"));
    }
    entry->region = std::move(region).value();
    entry->refs = 1;
    counters_.pinnedBytes += entry->range.bytes();
    ++counters_.pinnedRegions;
    applyUnmapEventsLocked(dead);  // marks the entry stale if its memory went away meanwhile
    if (!entry->stale) {
      retireOverlappingLocked(entry->range, dead, false, access);
      entry->indexed = true;
      index_.emplace(IndexKey{access, entry->range.begin}, entry.get());
    }
    ref.cache_ = this;
    ref.region_ = entry->region.get();
    ref.entry_ = entry.release();
    evictLocked(dead);
  }
  destroy(dead);
  return ref;
}

void RegistrationCache::release(CacheEntry* entry) {
  DeadList dead;
  {
    std::lock_guard lock(mutex_);
    applyUnmapEventsLocked(dead);
    if (--entry->refs == 0) {
      if (entry->indexed) {
        lruPushLocked(entry);
        evictLocked(dead);
      } else {
        retireLocked(entry, dead);
      }
    }
  }
  destroy(dead);
}

void RegistrationCache::invalidate(const void* address, size_t length) {
  if (!caching_ || length == 0) return;
  onUnmap(reinterpret_cast<uintptr_t>(address), reinterpret_cast<uintptr_t>(address) + length);
  DeadList dead;
  {
    std::lock_guard lock(mutex_);
    applyUnmapEventsLocked(dead);
  }
  destroy(dead);
}

void RegistrationCache::flush() {
  DeadList dead;
  {
    std::lock_guard lock(mutex_);
    applyUnmapEventsLocked(dead);
    while (lruHead_ != nullptr) retireLocked(lruHead_, dead);
  }
  destroy(dead);
}

CacheCounters RegistrationCache::counters() {
  DeadList dead;
  CacheCounters counters;
  {
    std::lock_guard lock(mutex_);
    applyUnmapEventsLocked(dead);
    counters = counters_;
  }
  destroy(dead);
  return counters;
}

void RegistrationCache::growHullLocked(PageRange range) {
  if (index_.empty() && registering_.size() == 1) {  // nothing else cached: start afresh
    hullBegin_.store(range.begin, std::memory_order_release);
    hullEnd_.store(range.end, std::memory_order_release);
    return;
  }
  if (range.begin < hullBegin_.load(std::memory_order_relaxed)) hullBegin_.store(range.begin, std::memory_order_release);
  if (range.end > hullEnd_.load(std::memory_order_relaxed)) hullEnd_.store(range.end, std::memory_order_release);
}

void RegistrationCache::onUnmap(uintptr_t begin, uintptr_t end) noexcept {
  if (end <= hullBegin_.load(std::memory_order_acquire) || begin >= hullEnd_.load(std::memory_order_acquire)) return;
  PageRange range{alignDown(begin, pageSize_), end};
  Backoff backoff;
  while (eventLock_.test_and_set(std::memory_order_acquire)) backoff.pause();
  if (eventCount_ < kMaxQueuedEvents) {
    events_[eventCount_++] = range;
  } else {
    eventOverflow_ = true;
  }
  eventsPending_.store(true, std::memory_order_release);
  eventLock_.clear(std::memory_order_release);
}

void RegistrationCache::applyUnmapEventsLocked(DeadList& dead) {
  if (!eventsPending_.load(std::memory_order_acquire)) return;
  // Copy the queue out first: retiring entries frees memory, and a custom
  // allocator may unmap from inside free(), which re-enters onUnmap().
  PageRange events[kMaxQueuedEvents];
  Backoff backoff;
  while (eventLock_.test_and_set(std::memory_order_acquire)) backoff.pause();
  size_t count = eventCount_;
  bool overflow = eventOverflow_;
  std::copy(events_, events_ + count, events);
  eventCount_ = 0;
  eventOverflow_ = false;
  eventsPending_.store(false, std::memory_order_relaxed);
  eventLock_.clear(std::memory_order_release);

  if (overflow) {
    for (CacheEntry* entry : registering_) entry->stale = true;
    retireOverlappingLocked({0, UINTPTR_MAX}, dead, true);
    return;
  }
  for (size_t i = 0; i < count; ++i) {
    for (CacheEntry* entry : registering_) {
      if (entry->range.overlaps(events[i])) entry->stale = true;
    }
    retireOverlappingLocked(events[i], dead, true);
  }
}

void RegistrationCache::retireOverlappingLocked(PageRange range, DeadList& dead, bool countAsInvalidation,
                                                std::optional<uint32_t> access) {
  if (access) return retireOverlappingInClassLocked(*access, range, dead, countAsInvalidation);
  // Few access classes exist (the combinations callers use): visit each.
  for (auto it = index_.begin(); it != index_.end();) {
    uint32_t current = it->first.first;
    retireOverlappingInClassLocked(current, range, dead, countAsInvalidation);
    if (current == UINT32_MAX) break;
    it = index_.lower_bound({current + 1, 0});
  }
}

void RegistrationCache::retireOverlappingInClassLocked(uint32_t access, PageRange range, DeadList& dead,
                                                       bool countAsInvalidation) {
  auto it = firstOverlapLocked(access, range);
  while (it != index_.end() && it->first.first == access && it->second->range.begin < range.end) {
    CacheEntry* entry = it->second;
    ++it;
    if (countAsInvalidation) ++counters_.invalidations;
    retireLocked(entry, dead);
  }
}

void RegistrationCache::retireLocked(CacheEntry* entry, DeadList& dead) {
  if (entry->indexed) {
    index_.erase(IndexKey{entry->access, entry->range.begin});
    entry->indexed = false;
  }
  lruRemoveLocked(entry);
  if (entry->refs == 0) {
    counters_.pinnedBytes -= entry->range.bytes();
    --counters_.pinnedRegions;
    dead.push_back(entry);
  }
}

void RegistrationCache::evictLocked(DeadList& dead) {
  while (lruHead_ != nullptr &&
         (counters_.pinnedBytes > options_.maxBytes || counters_.pinnedRegions > options_.maxRegions)) {
    ++counters_.evictions;
    retireLocked(lruHead_, dead);
  }
}

void RegistrationCache::lruRemoveLocked(CacheEntry* entry) {
  if (!entry->inLru) return;
  (entry->lruPrev != nullptr ? entry->lruPrev->lruNext : lruHead_) = entry->lruNext;
  (entry->lruNext != nullptr ? entry->lruNext->lruPrev : lruTail_) = entry->lruPrev;
  entry->lruPrev = entry->lruNext = nullptr;
  entry->inLru = false;
}

void RegistrationCache::lruPushLocked(CacheEntry* entry) {
  entry->lruPrev = lruTail_;
  entry->lruNext = nullptr;
  (lruTail_ != nullptr ? lruTail_->lruNext : lruHead_) = entry;
  lruTail_ = entry;
  entry->inLru = true;
}

void RegistrationCache::destroy(DeadList& dead) {
  for (CacheEntry* entry : dead) {
    destroyRegion(providerLock_, std::move(entry->region));
    delete entry;
  }
  dead.clear();
}

}  // namespace ibdt::memory
