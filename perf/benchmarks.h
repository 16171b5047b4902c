// perf/benchmarks.h — the list of ibdt-bench subcommands.
#pragma once

#include <functional>
#include <vector>

#include <CLI/CLI.hpp>

#include "perf/report.h"

namespace ibdt::perf {

// Adds one subcommand to `app`; its callback runs the benchmark with the
// shared options (already parsed when the callback runs).
using AddBenchmark = std::function<void(CLI::App& app, const CommonOptions& common)>;

// Every benchmark, in the order `ibdt-bench --help` lists them.
std::vector<AddBenchmark> allBenchmarks();

// Exit status: non-zero once any benchmark reported a failed check.
int exitCode();
void reportFailure(const std::string& what);

}  // namespace ibdt::perf
