// perf/forked_ranks.h — the one harness of the benchmarks whose ranks are
// processes: N ranks as forked processes of ibdt-bench (one core each when
// they fit, as launchers bind them; else unbound), joined by
// Unix socket pairs to rank 0 (a star). Their bootstrap is enough for
// messaging::Context::create, for barriers (an empty allgather) and for
// swapping addresses and keys (two ranks: all[1 - rank] is the peer's).
#pragma once

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

// Whether runForkedRanks gives each of `ranks` ranks a core of its own.
bool ranksFitCores(int ranks);

}  // namespace ibdt::perf
