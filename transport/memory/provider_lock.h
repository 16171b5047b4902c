// transport/memory/provider_lock.h — one lock per domain for the memory
// layer's calls into it.
//
// A Domain is not thread-safe (fabric.h), but the pool and the registration
// cache are. Every registration, allocation and deregistration they make on a
// domain holds that domain's lock, and nothing else is acquired while it is
// held (it is always the innermost lock), so it cannot take part in a
// deadlock. Unmap events raised inside the provider only queue (see
// registration_cache.h).
#pragma once

#include <memory>
#include <mutex>

#include "ibdt/fabric.h"

namespace ibdt::memory {

// The lock of `domain`, the same object for every caller.
std::mutex& providerLock(const fabric::Domain& domain);

// Destroys (deregisters) a region under its domain's lock.
inline void destroyRegion(std::mutex& lock, std::unique_ptr<fabric::MemoryRegion> region) {
  if (region == nullptr) return;
  std::lock_guard guard(lock);
  region.reset();
}

}  // namespace ibdt::memory
