// perf/forked_ranks.h — N ranks of a benchmark as forked processes of
// ibdt-bench, joined by Unix socket pairs to rank 0 (a star), which is
// enough of a bootstrap for messaging::Context::create and for barriers.
#pragma once

#include <functional>
#include <string_view>

#include "ibdt/messaging.h"
#include "ibdt/status.h"

namespace ibdt::perf {

// Runs body(bootstrap, rank) here as rank 0 and in ranks - 1 forked
// children. Reports a failure of any rank through reportFailure(), naming
// `benchmark`; returns whether every rank succeeded. Only rank 0 returns
// from this call: children exit when their body ends.
bool runForkedRanks(std::string_view benchmark, int ranks,
                    const std::function<Status(messaging::Bootstrap& bootstrap)>& body);

}  // namespace ibdt::perf
