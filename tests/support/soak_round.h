// tests/support/soak_round.h — the soak's rounds (issue 17), shared by the
// thread soak (tests/collectives/soak_thread_test.cc, loopback fabric) and
// `ibdt-bench soak` (perf/soak_bench.cc, forked processes over shm). Every
// rank draws the same operation from one seed per round, so they agree on
// it without talking: a shifted point-to-point exchange of a random
// derived type, an alltoall of a random block, an alltoallv of random
// counts (zeros included) or a barrier. Every received byte is checked
// against what its sender meant, and the guard bytes after it.
// No gtest here: ibdt-bench links this too.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "ibdt/collectives.h"
#include "ibdt/messaging.h"

namespace ibdt::collectives::testing {

// Messaging limits so small that short messages cross them: few credits
// (flow control), a 256-byte eager limit and 1000-byte rendezvous segments.
messaging::Options soakOptions();

// What a rank saw over its rounds. `status` is the library's first error
// (the run stops there); `wrong` names the first byte that differed from
// what its sender meant (bytes are checked only when the operation
// succeeded), empty while every byte was right.
struct SoakTally {
  uint64_t rounds = 0;        // completed rounds
  int64_t bytesChecked = 0;   // received bytes compared with what was meant
  Status status;
  std::string wrong;
  bool failed() const { return !status.isOk() || !wrong.empty(); }
};

// One round (number `round` of the sequence of `seed`), the same operation
// on every rank; adds to `tally`. Each wait ends by `deadline`.
void soakRound(messaging::Context& context, Communicator& comm, uint64_t round, uint64_t seed, Deadline deadline,
               SoakTally& tally);

// Rounds until rank 0's clock passes `until` (rank 0 decides each round and
// broadcasts it, so every rank stops at the same round) or a failure. Each
// round must end within `roundBound`.
SoakTally soakUntil(messaging::Context& context, Communicator& comm, std::chrono::steady_clock::time_point until,
                    uint64_t seed, std::chrono::milliseconds roundBound);

// Rounds until a failure or `maxRounds` (the kill mode: a survivor goes on
// until it notices the dead rank).
SoakTally soakUntilFailure(messaging::Context& context, Communicator& comm, uint64_t maxRounds, uint64_t seed,
                           std::chrono::milliseconds roundBound);

}  // namespace ibdt::collectives::testing
