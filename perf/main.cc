// ibdt-bench — the project's benchmarks, one subcommand each.
//
//   ibdt-bench [--json] [--out DIR] [--reps N] [--warmup N] [--quick] <benchmark> [options]
//
// Every subcommand measures ibdt beside its baselines in the same run and
// prints the median with min and max.
#include <CLI/CLI.hpp>

#include "perf/benchmarks.h"

int main(int argc, char** argv) {
  CLI::App app{"ibdt-bench: ibdt's benchmarks beside their baselines"};
  app.require_subcommand(1);
  ibdt::perf::CommonOptions common;
  app.add_flag("--json", common.json, "print JSON instead of a table");
  app.add_option("--reps", common.reps, "timed repetitions per case")->check(CLI::PositiveNumber);
  app.add_option("--warmup", common.warmup, "untimed warm-up runs per case")->check(CLI::NonNegativeNumber);
  app.add_flag("--quick", common.quick, "fewer cases and repetitions (smoke test)");
  app.add_option("--out", common.outDir, "also write each report's JSON and SVG plots into this directory");
  for (const auto& add : ibdt::perf::allBenchmarks()) add(app, common);
  CLI11_PARSE(app, argc, argv);
  return ibdt::perf::exitCode();
}
