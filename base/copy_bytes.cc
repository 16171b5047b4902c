#include "base/copy_bytes.h"

#include <atomic>
#include <cstring>
#include <mutex>

#include "base/vector_copy.h"

namespace ibdt {
namespace {

std::atomic<uint32_t> slowMask{0};
std::once_flag measured;

void measureOnce() {
  std::call_once(measured, [] {
    SlowDistances slow = measureSlowDistances([](uint8_t* to, const uint8_t* from, size_t bytes) {
      std::memcpy(to, from, bytes);
      asm volatile("" : : "r"(to) : "memory");
    });
    slowMask.store(slow.mask(), std::memory_order_relaxed);
  });
}

}  // namespace

SlowDistances memcpySlowDistances() {
  measureOnce();
  return SlowDistances(slowMask.load(std::memory_order_relaxed));
}

void setMemcpySlowDistancesForTesting(SlowDistances distances) {
  measureOnce();  // not later, over the test's choice
  slowMask.store(distances.mask(), std::memory_order_relaxed);
}

void copyBytes(void* destination, const void* source, size_t bytes) {
  if (bytes >= SlowDistances::kMinBytes) {
    measureOnce();
    if (SlowDistances(slowMask.load(std::memory_order_relaxed))
            .slow(reinterpret_cast<uintptr_t>(destination), reinterpret_cast<uintptr_t>(source), bytes)) {
      return copyWithVectorLoop(destination, source, bytes);
    }
  }
  std::memcpy(destination, source, bytes);
}

}  // namespace ibdt
