#include "transport/memory/provider_lock.h"

#include <map>

namespace ibdt::memory {

std::mutex& providerLock(const fabric::Domain& domain) {
  static std::mutex tableMutex;
  // Never destroyed: regions may be released during exit. A domain address
  // reused by a later domain shares the lock, which is harmless.
  static auto* table = new std::map<const fabric::Domain*, std::unique_ptr<std::mutex>>();
  std::lock_guard guard(tableMutex);
  auto& lock = (*table)[&domain];
  if (lock == nullptr) lock = std::make_unique<std::mutex>();
  return *lock;
}

}  // namespace ibdt::memory
