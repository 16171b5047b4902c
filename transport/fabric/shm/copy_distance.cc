#include "transport/fabric/shm/copy_distance.h"

#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

#include "base/copy_bytes.h"
#include "base/log.h"
#include "transport/fabric/shm/remote_copy.h"

namespace ibdt::fabric::shm {
namespace {
std::atomic<uint32_t> slowMask{0};
}  // namespace

void measureCrossMemorySlowDistances() {
  static std::once_flag once;
  std::call_once(once, [] {
    SlowDistances slow;
    if (crossMemoryAttachAvailable()) {
      pid_t self = getpid();
      slow = measureSlowDistances([self](uint8_t* to, const uint8_t* from, size_t bytes) {
        iovec local{const_cast<uint8_t*>(from), bytes};
        iovec remote{to, bytes};
        (void)process_vm_writev(self, &local, 1, &remote, 1, 0);
      });
    }
    slowMask.store(slow.mask(), std::memory_order_relaxed);
    IBDT_LOG(kDebug, "slow copy distances (destination - source mod 4096): memcpy ",
             memcpySlowDistances().describe(), ", cross-memory ", slow.describe());
  });
}

SlowDistances crossMemorySlowDistances() { return SlowDistances(slowMask.load(std::memory_order_relaxed)); }

void setCrossMemorySlowDistancesForTesting(SlowDistances distances) {
  measureCrossMemorySlowDistances();  // not later, over the test's choice
  slowMask.store(distances.mask(), std::memory_order_relaxed);
}

}  // namespace ibdt::fabric::shm
