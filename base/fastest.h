// base/fastest.h — timing a short operation on a shared machine: the
// fastest of a few runs is the estimate least disturbed by other work.
// Used by the calibrations that feed the cost models (fabric, messaging).
#pragma once

#include <algorithm>
#include <chrono>

namespace ibdt {

// Nanoseconds of the fastest of `rounds` calls of fn().
template <typename Fn>
double fastestNs(int rounds, Fn&& fn) {
  double fastest = 1e18;
  for (int round = 0; round < rounds; ++round) {
    auto start = std::chrono::steady_clock::now();
    fn();
    std::chrono::duration<double, std::nano> spent = std::chrono::steady_clock::now() - start;
    fastest = std::min(fastest, spent.count());
  }
  return fastest;
}

}  // namespace ibdt
