// perf/two_processes.h — the two-rank harness of the point-to-point benchmarks.
#pragma once

#include <functional>
#include <string_view>

#include "ibdt/messaging.h"
#include "ibdt/status.h"

namespace ibdt::perf {

// Runs body(fd, rank) here as rank 0 and in a forked child as rank 1, the two
// joined by a Unix socketpair (fd is this side's end). Reports a failure of
// either side through reportFailure(), naming `benchmark`; returns whether
// rank 0 (this process) succeeded.
bool runTwoProcesses(std::string_view benchmark, const std::function<Status(int fd, int rank)>& body);

// Two ranks over a socket pair: enough of a bootstrap for a forked peer.
messaging::Bootstrap socketBootstrap(int socket, int rank);

}  // namespace ibdt::perf
