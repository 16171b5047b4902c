// tests/support/thread_exchange.h — an in-process allgather for ranks run
// as threads (no test framework: the fuzz targets use it too).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "ibdt/status.h"

namespace ibdt::messaging::testing {

// A reusable in-process allgather (and so a barrier) for `size` threads.
class ThreadExchange {
 public:
  explicit ThreadExchange(int size) : size_(size), slots_(static_cast<size_t>(size)) {}

  Result<std::vector<std::vector<uint8_t>>> allgather(int rank, std::span<const uint8_t> value) {
    std::unique_lock lock(mutex_);
    uint64_t round = round_;
    slots_[static_cast<size_t>(rank)].assign(value.begin(), value.end());
    if (++arrived_ == size_) {
      result_ = slots_;
      arrived_ = 0;
      ++round_;
      changed_.notify_all();
    } else {
      changed_.wait(lock, [&] { return round_ != round; });
    }
    return result_;
  }

 private:
  int size_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::vector<uint8_t>> slots_;
  std::vector<std::vector<uint8_t>> result_;
  int arrived_ = 0;
  uint64_t round_ = 0;
};

}  // namespace ibdt::messaging::testing
