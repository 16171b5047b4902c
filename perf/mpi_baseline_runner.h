// perf/mpi_baseline_runner.h — running the MPI baseline programs.
//
// ibdt-bench does not link MPI. The baselines (perf/mpi_*_baseline.cc) are
// built once per MPI library found, each with that library's own compiler
// wrapper, and run here as child processes: a singleton for MPI_Pack, two
// ranks under the library's own launcher for the point-to-point ones. They
// print one JSON object per line on stdout; {"error": ...} means they failed.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ibdt/status.h"
#include "perf/report.h"

namespace ibdt::perf {

struct MpiLibrary {
  std::string name;       // "Open MPI", "MPICH": also the bench row name
  std::string label;      // "ompi", "mpich": short column prefix
  std::string launcher;   // mpirun.openmpi / mpiexec.mpich ("" when not installed)
  std::string packProgram;    // ibdt-mpi-pack-<library>
  std::string vectorProgram;  // ibdt-mpi-vector-<library>
  std::string alltoallProgram;  // ibdt-mpi-alltoall-<library>
  std::string alltoallvProgram;  // ibdt-mpi-alltoallv-<library>
  std::string bridgeProgram;     // ibdt-mpi-bridge-<library> ("" when the MPI bridge was not built)
};

// The MPI libraries ibdt-bench was built with, in a fixed order.
const std::vector<MpiLibrary>& mpiLibraries();

// How runMpiBaseline starts `ranks` processes of `library`, for reports:
// the launcher and its options ("" for a singleton).
std::string mpiLaunchDescription(const MpiLibrary& library, int ranks);

// Runs `program args...` (ranks == 1: directly, as an MPI singleton; else
// `ranks` processes under the library's launcher) and returns the JSON lines
// it printed. Fails, naming the command, its exit status and the tail of its
// stderr, when it cannot start, exits non-zero, prints an {"error": ...}
// line, or outlives `timeout` (then its whole process group is killed).
Result<std::vector<nlohmann::json>> runMpiBaseline(const MpiLibrary& library, const std::string& program, int ranks,
                                                   const std::vector<std::string>& args,
                                                   std::chrono::seconds timeout);

// runMpiBaseline for a report: returns the program's result lines (those
// with a "row"), notes the library's own description under "<library.name>
// (<ranks> ranks)" ("..., run as `<launch>`<launchNote>"; one note per rank
// count) and, when nothing was measured, why under `key`.
std::vector<nlohmann::json> runMpiRows(const MpiLibrary& library, const std::string& program, int ranks,
                                       const std::vector<std::string>& args, std::chrono::seconds timeout,
                                       Report& report, const std::string& key, const std::string& launchNote = "");

// A baseline's [median, min, max] seconds as a Summary.
Summary summaryOf(const nlohmann::json& triple);

}  // namespace ibdt::perf
