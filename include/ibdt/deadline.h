// ibdt/deadline.h — a point in time after which a waiting call gives up.
//
// Every call that waits (store get/fence/barrier, blocking completion waits,
// message waits) takes a Deadline and fails with Code::kTimeout once it has
// passed, naming what it was waiting for.
#pragma once

#include <chrono>

namespace ibdt {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  static Deadline never() { return Deadline(Clock::time_point::max()); }
  static Deadline at(Clock::time_point when) { return Deadline(when); }
  template <typename Rep, typename Period>
  static Deadline after(std::chrono::duration<Rep, Period> span) {
    return Deadline(Clock::now() + std::chrono::duration_cast<Clock::duration>(span));
  }

  bool isNever() const { return when_ == Clock::time_point::max(); }
  bool expired() const { return !isNever() && Clock::now() >= when_; }
  Clock::time_point when() const { return when_; }
  // Time left, zero once expired; a very large value for never().
  Clock::duration remaining() const {
    if (isNever()) return Clock::duration::max();
    auto left = when_ - Clock::now();
    return left.count() > 0 ? left : Clock::duration::zero();
  }

 private:
  explicit Deadline(Clock::time_point when) : when_(when) {}
  Clock::time_point when_;
};

}  // namespace ibdt
