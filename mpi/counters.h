// mpi/counters.h — what the bridge did in this process (IBDT_Mpi_get_counters).
#pragma once

#include <atomic>
#include <cstdint>

namespace ibdt::mpi {

struct Counters {
  std::atomic<uint64_t> alltoallIbdt{0};
  std::atomic<uint64_t> alltoallMpi{0};
  std::atomic<uint64_t> packIbdt{0};
  std::atomic<uint64_t> packMpi{0};
  std::atomic<uint64_t> alltoallvIbdt{0};
  std::atomic<uint64_t> alltoallvMpi{0};
  std::atomic<uint64_t> ialltoallIbdt{0};
  std::atomic<uint64_t> ialltoallMpi{0};
};

inline Counters& counters() {
  static Counters instance;
  return instance;
}

}  // namespace ibdt::mpi
