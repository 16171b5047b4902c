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

// Takes `--rows a,b` at argv[i]: whether it names "vector" and "contig".
inline bool parseRowsOption(int argc, char** argv, int& i, bool& vector, bool& contig) {
  if (i + 1 >= argc || std::strcmp(argv[i], "--rows") != 0) return false;
  const std::string rows = argv[++i];
  vector = rows.find("vector") != std::string::npos;
  contig = rows.find("contig") != std::string::npos;
  return true;
}

// Appends the comma-separated integers of `text` to `out`; false when one
// is not accepted by `valid`.
template <typename Valid>
bool parseIntegerList(const char* text, std::vector<int64_t>& out, Valid&& valid) {
  std::istringstream list(text);
  for (std::string item; std::getline(list, item, ',');) {
    const long long value = std::atoll(item.c_str());
    if (!valid(value)) return false;
    out.push_back(value);
  }
  return true;
}

}  // namespace ibdt::perf
