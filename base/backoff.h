// base/backoff.h — the polling discipline for every wait loop in ibdt.
//
// Spin briefly (cheap when the peer runs on another core), then yield, then
// sleep in short naps, so 8 ranks on 2 cores never spin each other to a halt.
// Call pause() after each empty poll and reset() after progress.
#pragma once

#include <sched.h>
#include <time.h>

#include <cstdint>

namespace ibdt {

class Backoff {
 public:
  static constexpr uint32_t kSpins = 64;
  static constexpr uint32_t kYields = 256;
  static constexpr long kNapNanos = 50'000;  // 50 us

  // `spins`: pauses before the first yield. Spinning longer keeps a waiter
  // that owns its core from paying a system call per poll; processes that
  // share cores must yield early (the default).
  explicit Backoff(uint32_t spins = kSpins) : spins_(spins) {}

  void reset() { rounds_ = 0; }
  // Still in the spinning phase: the next pause() costs no system call.
  bool spinning() const { return rounds_ < spins_; }
  // Past spinning and yielding: the next pause() naps. A waiter that can
  // sleep until its peer rings (CompletionQueue::wait) does that instead.
  bool napping() const { return rounds_ >= spins_ + kYields; }
  void pause() {
    if (rounds_ < spins_) {
      ++rounds_;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    } else if (rounds_ < spins_ + kYields) {
      ++rounds_;
      sched_yield();
    } else {
      timespec nap{0, kNapNanos};
      nanosleep(&nap, nullptr);
    }
  }

 private:
  uint32_t spins_;
  uint32_t rounds_ = 0;
};

}  // namespace ibdt
