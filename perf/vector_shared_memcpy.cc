#include "perf/vector_shared_memcpy.h"

#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include "perf/forked_ranks.h"
#include "perf/vector_cases.h"

namespace ibdt::perf {
namespace {

constexpr size_t kArrayBytes = size_t{kVectorRows * kVectorColumns} * sizeof(int32_t);

struct Shared {
  std::atomic<uint64_t> turn;  // even: rank 0 holds the data, odd: rank 1
  std::atomic<int> failed;
};

// Spins (the bench owns both cores); yields now and then so an
// oversubscribed machine still makes progress.
void waitFor(const std::atomic<uint64_t>& turn, uint64_t value) {
  for (uint32_t spins = 0; turn.load(std::memory_order_acquire) != value; ++spins) {
    if ((spins & 1023) == 1023) sched_yield();
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
}

void copyColumns(const int32_t* from, int32_t* to, int64_t x) {
  for (int64_t r = 0; r < kVectorRows; ++r) {
    std::memcpy(to + r * kVectorColumns, from + r * kVectorColumns, static_cast<size_t>(x) * sizeof(int32_t));
  }
}

}  // namespace

Result<SharedMemcpy> measureSharedMemcpy(int64_t x, int warmup, int reps, int pingPongsPerRep) {
  size_t total = 4096 + 2 * kArrayBytes;
  void* memory = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) return makeError(Code::kSystem, "shared memcpy: mmap: ", std::strerror(errno));
  auto* shared = new (memory) Shared{};
  int32_t* arrays[2] = {reinterpret_cast<int32_t*>(static_cast<uint8_t*>(memory) + 4096),
                        reinterpret_cast<int32_t*>(static_cast<uint8_t*>(memory) + 4096 + kArrayBytes)};
  std::vector<int32_t> pattern;
  for (int rank = 0; rank < 2; ++rank) {
    fillVectorPattern(pattern, rank);
    std::memcpy(arrays[rank], pattern.data(), kArrayBytes);
  }
  // The same two forked ranks as ibdt's rows (a core each where they fit);
  // the arrays and the turn are shared because the mapping is inherited.
  SharedMemcpy result;
  const bool ran = runForkedRanks("shared memcpy", 2, [&](messaging::Bootstrap& bootstrap) -> Status {
    const int rank = bootstrap.rank;
    int32_t* mine = arrays[rank];
    int32_t* peers = arrays[1 - rank];
    uint64_t turn = 0;
    // One message from whoever holds the turn to the other side.
    auto message = [&](int copies) {
      if (static_cast<int>(turn % 2) == rank) {
        waitFor(shared->turn, turn);
        for (int i = 0; i < copies; ++i) copyColumns(mine, peers, x);
        shared->turn.store(turn + 1, std::memory_order_release);
      }
      ++turn;
    };
    auto pingPong = [&] {
      message(1);
      message(1);
    };
    // Checked first: rank 1's columns must be rank 0's, then back.
    message(1);
    if (rank == 1) {
      waitFor(shared->turn, turn);
      std::vector<int32_t> copy(mine, mine + kVectorRows * kVectorColumns);
      if (!checkVectorColumns(copy, x, 0, 1).empty()) shared->failed.store(1);
    }
    message(1);
    auto roundTrips = measure(warmup, reps, pingPongsPerRep, pingPong);
    auto windowRuns = measure(warmup, reps, 1, [&] {
      message(kVectorWindow);  // rank 0 copies the window, rank 1 acks
      message(0);
    });
    if (rank == 0) result = SharedMemcpy{summarize(roundTrips), summarize(windowRuns)};
    return Status::ok();
  });
  const bool failed = shared->failed.load() != 0;
  munmap(memory, total);
  if (failed) return makeError(Code::kInternal, "shared memcpy: x=", x, ": the copied columns are wrong");
  if (!ran) return makeError(Code::kInternal, "shared memcpy: a rank failed (reported above)");
  return result;
}

}  // namespace ibdt::perf
