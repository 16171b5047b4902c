// perf/mpi_baseline_support.h — what the MPI baseline programs
// (perf/mpi_*_baseline.cc, built with an MPI compiler wrapper) share: their
// JSON line output, the library line, and the repetition options.
#pragma once

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ibdt::perf {

inline void printLine(const nlohmann::json& line) {
  std::printf("%s\n", line.dump().c_str());
  std::fflush(stdout);
}

// {"library": "<first line of MPI_Get_library_version>"}.
inline void printLibraryLine() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(version, &length);
  std::string firstLine(version, static_cast<size_t>(length));
  firstLine = firstLine.substr(0, firstLine.find_first_of("\n,"));
  for (char& c : firstLine) c = c == '\t' ? ' ' : c;  // MPICH: "MPICH Version:\t4.0.2"
  printLine({{"library", firstLine}});
}

// MPI_Init, then this rank and the size of MPI_COMM_WORLD.
struct World {
  int rank = 0;
  int size = 0;
};
inline World initWorld(int* argc, char*** argv) {
  MPI_Init(argc, argv);
  World world;
  MPI_Comm_rank(MPI_COMM_WORLD, &world.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world.size);
  return world;
}

// Rank 0 reports the usage error as a JSON line; every rank finalises.
// Returns main's exit status.
inline int usageError(const World& world, const std::string& usage) {
  if (world.rank == 0) printLine({{"error", usage}});
  MPI_Finalize();
  return 2;
}

// Takes `--reps N` or `--warmup N` at argv[i] (moving i past the value);
// false when argv[i] is neither.
inline bool parseRepetitionOption(int argc, char** argv, int& i, int& reps, int& warmup) {
  if (i + 1 >= argc) return false;
  if (!std::strcmp(argv[i], "--reps")) {
    reps = std::atoi(argv[++i]);
  } else if (!std::strcmp(argv[i], "--warmup")) {
    warmup = std::atoi(argv[++i]);
  } else {
    return false;
  }
  return true;
}

// What every baseline program takes: the sizes to run (one list option,
// e.g. --x or --bytes), repetitions and which rows.
struct BaselineOptions {
  std::vector<int64_t> sizes;
  int reps = 15;
  int warmup = 3;
  bool vector = true;
  bool contig = true;
};

// Parses --reps N, --warmup N, --rows vector,contig and `listFlag a,b,c`
// (each value accepted by `valid`); `defaults` when the list is not given.
template <typename Valid>
bool parseBaselineOptions(int argc, char** argv, const char* listFlag, Valid&& valid,
                          const std::vector<int64_t>& defaults, BaselineOptions& options) {
  for (int i = 1; i < argc; ++i) {
    if (parseRepetitionOption(argc, argv, i, options.reps, options.warmup)) continue;
    if (i + 1 >= argc) return false;
    if (!std::strcmp(argv[i], "--rows")) {
      const std::string rows = argv[++i];
      options.vector = rows.find("vector") != std::string::npos;
      options.contig = rows.find("contig") != std::string::npos;
    } else if (!std::strcmp(argv[i], listFlag)) {
      std::istringstream list(argv[++i]);
      for (std::string item; std::getline(list, item, ',');) {
        const long long value = std::atoll(item.c_str());
        if (!valid(value)) return false;
        options.sizes.push_back(value);
      }
    } else {
      return false;
    }
  }
  if (options.sizes.empty()) options.sizes = defaults;
  return options.reps > 0 && options.warmup >= 0;
}

}  // namespace ibdt::perf
