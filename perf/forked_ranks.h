// perf/forked_ranks.h — the one harness of the benchmarks whose ranks are
// processes: N ranks as forked processes of ibdt-bench (one core each when
// they fit, as launchers bind them; else unbound), joined by
// Unix socket pairs to rank 0 (a star). Their bootstrap is enough for
// messaging::Context::create, for barriers (an empty allgather) and for
// swapping addresses and keys (two ranks: all[1 - rank] is the peer's).
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "ibdt/messaging.h"
#include "ibdt/status.h"

namespace ibdt::perf {

// Runs body(bootstrap) here as rank 0 and in ranks - 1 forked children
// (bootstrap.rank says which). Reports a failure of any rank through
// reportFailure(), naming `benchmark`; returns whether every rank
// succeeded. Only rank 0 returns from this call: children exit when their
// body ends.
bool runForkedRanks(std::string_view benchmark, int ranks,
                    const std::function<Status(messaging::Bootstrap& bootstrap)>& body);

// Forks all `ranks` ranks (rank 0 too), joined as runForkedRanks' are, each
// exiting with body's result; the caller stays out of the job (free to kill
// any rank, as `ibdt-bench soak --kill` does) and must reap the returned
// pids (index: rank).
Result<std::vector<pid_t>> forkRankProcesses(int ranks, const std::function<int(messaging::Bootstrap&)>& body);

// Every rank's verdict, so all fail together: "" when all were right, else
// the first rank's complaint (collective).
Result<std::string> agreeAcrossRanks(messaging::Bootstrap& bootstrap, const std::string& mine);
// The slowest rank's time of each repetition, on every rank (collective).
Result<std::vector<double>> slowestAcrossRanks(messaging::Bootstrap& bootstrap, const std::vector<double>& mine);

// Binds the calling process to the rank-th core it may use while it lives,
// when there are at least `ranks` such cores (else nothing), as mpirun and
// srun bind ranks that fit by default. Unbound, two polling ranks are at
// times left on one core (after a socket wake-up, say) where the one that
// spins holds the core the other needs: a 2-rank 8-byte alltoall then took
// 355 us instead of 0.7. runForkedRanks binds ranks that fit for their body's
// duration; oversubscribed ranks stay unbound (they yield at once,
// IBDT_MSG_SPIN).
class CoreBinding {
 public:
  CoreBinding(int rank, int ranks);
  ~CoreBinding();
  CoreBinding(const CoreBinding&) = delete;
  CoreBinding& operator=(const CoreBinding&) = delete;

 private:
  cpu_set_t saved_{};
  bool bound_ = false;
};

// Whether runForkedRanks gives each of `ranks` ranks a core of its own.
bool ranksFitCores(int ranks);

}  // namespace ibdt::perf
