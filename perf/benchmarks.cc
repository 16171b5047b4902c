#include "perf/benchmarks.h"

#include <cstdio>

namespace ibdt::perf {

void addPackBenchmark(CLI::App& app, const CommonOptions& common);  // perf/pack_bench.cc
void addFabricBenchmark(CLI::App& app, const CommonOptions& common);
void addBootstrapBenchmark(CLI::App& app, const CommonOptions& common);
void addRegistrationBenchmark(CLI::App& app, const CommonOptions& common);
void addVectorBenchmark(CLI::App& app, const CommonOptions& common);
void addConnectBenchmark(CLI::App& app, const CommonOptions& common);
void addAlltoallBenchmark(CLI::App& app, const CommonOptions& common);
void addAlltoallvBenchmark(CLI::App& app, const CommonOptions& common);  // perf/alltoallv_bench.cc
void addMpiBenchmark(CLI::App& app, const CommonOptions& common);        // perf/mpi_bridge_bench.cc
void addSoakBenchmark(CLI::App& app, const CommonOptions& common);       // perf/soak_bench.cc

std::vector<AddBenchmark> allBenchmarks() {
  return {addPackBenchmark, addVectorBenchmark, addAlltoallBenchmark, addAlltoallvBenchmark, addMpiBenchmark, addFabricBenchmark, addRegistrationBenchmark, addBootstrapBenchmark,
          addConnectBenchmark, addSoakBenchmark};
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
