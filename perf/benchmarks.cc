#include "perf/benchmarks.h"

#include <cstdio>

namespace ibdt::perf {

void addFabricBenchmark(CLI::App& app, const CommonOptions& common);
void addVectorBenchmark(CLI::App& app, const CommonOptions& common);

std::vector<AddBenchmark> allBenchmarks() {
  return {addFabricBenchmark, addVectorBenchmark};
}

namespace {
int gExitCode = 0;
}

int exitCode() { return gExitCode; }

void reportFailure(const std::string& what) {
  std::fprintf(stderr, "ibdt-bench: %s\n", what.c_str());
  gExitCode = 1;
}

}  // namespace ibdt::perf
