// collectives/bruck_rounds.h — how many rounds a radix-2 Bruck exchange
// (alltoall, alltoallv, allgather) among `size` ranks takes: ceil(log2 size),
// 0 for one rank.
#pragma once

#include <cstdint>

namespace ibdt::collectives {

inline int bruckRounds(int64_t size) {
  int rounds = 0;
  while ((int64_t{1} << rounds) < size) ++rounds;
  return rounds;
}

}  // namespace ibdt::collectives
