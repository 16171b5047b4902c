#include "transport/memory/unmap_events.h"

#include <malloc.h>

#include <array>
#include <atomic>
#include <mutex>

#include "base/log.h"
#include "ibdt/memory.h"

namespace ibdt::memory {
namespace {

constexpr size_t kMaxListeners = 64;

struct Registry {
  std::mutex mutex;
  std::array<UnmapListener*, kMaxListeners> listeners{};
  std::atomic<size_t> count{0};
};

Registry& registry() {
  static Registry* instance = new Registry();  // never destroyed: munmap may run during exit
  return *instance;
}

// Depth of notifyUnmap() on this thread; initial-exec TLS needs no allocation.
__attribute__((tls_model("initial-exec"))) thread_local int tNotifyDepth = 0;

}  // namespace

Status addUnmapListener(UnmapListener* listener) {
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  for (UnmapListener*& slot : reg.listeners) {
    if (slot == nullptr) {
      slot = listener;
      reg.count.fetch_add(1, std::memory_order_release);
      return Status::ok();
    }
  }
  return makeError(Code::kResource, "unmap listeners: all ", kMaxListeners, " slots in use (too many registration caches)");
}

void removeUnmapListener(UnmapListener* listener) {
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  for (UnmapListener*& slot : reg.listeners) {
    if (slot == listener) {
      slot = nullptr;
      reg.count.fetch_sub(1, std::memory_order_release);
    }
  }
}

void notifyUnmap(const void* address, size_t length) noexcept {
  if (length == 0) return;
  Registry& reg = registry();
  if (reg.count.load(std::memory_order_acquire) == 0 || tNotifyDepth > 0) return;
  ++tNotifyDepth;
  auto begin = reinterpret_cast<uintptr_t>(address);
  uintptr_t end = begin + length < begin ? UINTPTR_MAX : begin + length;
  {
    std::lock_guard lock(reg.mutex);
    for (UnmapListener* listener : reg.listeners) {
      if (listener != nullptr) listener->onUnmap(begin, end);
    }
  }
  --tNotifyDepth;
}

bool retainHeapMemory() {
  static const bool accepted = [] {
    bool ok = mallopt(M_MMAP_MAX, 0) == 1;
    ok = mallopt(M_TRIM_THRESHOLD, -1) == 1 && ok;
    ok = mallopt(M_ARENA_MAX, 1) == 1 && ok;
    if (!ok) {
      log::once(log::Level::kInfo, "mallopt-refused",
                "memory: malloc refused mallopt(M_MMAP_MAX/M_TRIM_THRESHOLD/M_ARENA_MAX) (not glibc malloc?); "
                "freed heap memory may return to the kernel unseen");
    }
    return ok;
  }();
  return accepted;
}

}  // namespace ibdt::memory

namespace ibdt {

void memory::invalidateRegistrations(const void* address, size_t length) { notifyUnmap(address, length); }

}  // namespace ibdt
