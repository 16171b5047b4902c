// perf/process_exit.h — how a child process of ibdt-bench ended, for the
// messages of the forked ranks and the MPI baseline runs (header-only, so
// tests that build perf/mpi_baseline_runner.cc need nothing more).
#pragma once

#include <sys/wait.h>

#include <cstring>
#include <string>

#include "ibdt/status.h"

namespace ibdt::perf {

// From a waitpid() status: "exit status 1", "killed by signal 11 (Segmentation fault)".
inline std::string describeExit(int waitStatus) {
  if (WIFEXITED(waitStatus)) return "exit status " + std::to_string(WEXITSTATUS(waitStatus));
  if (WIFSIGNALED(waitStatus)) {
    return strCat("killed by signal ", WTERMSIG(waitStatus), " (", strsignal(WTERMSIG(waitStatus)), ")");
  }
  return "ended abnormally";
}

}  // namespace ibdt::perf
