// datatype/kernel_trials.h — choosing among copy kernels by timing the
// process's own first copies (why: datatype/block_copy.h). Not thread-safe:
// the caller holds its lock around next() and record().
#pragma once

#include <algorithm>
#include <iterator>

namespace ibdt::datatype {

// Trials of kKernels kernels, kPerKernel timed copies each, after one
// untimed copy (it takes a fresh buffer's page faults and cold misses). In
// cache the callers time a trial kernel's second copy of the same bytes;
// beyond it, one chunk of a call's blocks (datatype/block_copy.cc).
// Kernel 0 is the incumbent: another replaces it only when its fastest trial
// per byte is below `leaveIncumbentBelow` of kernel 0's (default
// kLeaveIncumbentBelow). `kernels` (at most kKernels) limits the trials to
// kernels 0 .. kernels-1.
template <int kKernels>
class KernelTrials {
 public:
  static constexpr double kLeaveIncumbentBelow = 0.85;

  explicit KernelTrials(int perKernel = 1, int kernels = kKernels, double leaveIncumbentBelow = kLeaveIncumbentBelow)
      : kernels_(std::clamp(kernels, 1, kKernels)), total_(kernels_ * perKernel), leaveIncumbentBelow_(leaveIncumbentBelow) {
    std::fill(std::begin(best_), std::end(best_), 1e300);
  }

  // The kernel for the next copy; timed = false for the untimed first copy
  // and once every trial is handed out (kernel 0 then, until decided).
  int next(bool& timed) {
    timed = false;
    if (!warmedUp_) {
      warmedUp_ = true;
      return 0;
    }
    if (handedOut_ == total_) return 0;
    timed = true;
    return handedOut_++ % kernels_;
  }

  // Records a timed copy; returns the winner once the last trial is in, else -1.
  int record(int kernel, double nsPerByte) {
    best_[kernel] = std::min(best_[kernel], nsPerByte);
    if (++recorded_ != total_) return -1;
    int winner = 0;
    for (int k = 1; k < kernels_; ++k) {
      if (best_[k] < best_[winner] * (winner == 0 ? leaveIncumbentBelow_ : 0.97)) winner = k;
    }
    return winner;
  }

 private:
  int kernels_;
  int total_;
  double leaveIncumbentBelow_;
  bool warmedUp_ = false;
  int handedOut_ = 0, recorded_ = 0;
  double best_[kKernels] = {};
};

}  // namespace ibdt::datatype
