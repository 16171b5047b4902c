// perf/mpi_baseline_support.h — what the MPI baseline programs
// (perf/mpi_*_baseline.cc, built with an MPI compiler wrapper) share: their
// JSON line output, the library line, and the repetition options.
#pragma once

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

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

}  // namespace ibdt::perf
