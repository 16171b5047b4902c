// bootstrap/launcher/run_command.h — runs a command and captures its output
// (ibdt-run's own tests, ibdt-bench bootstrap).
#pragma once

#include <string>
#include <vector>

namespace ibdt::bootstrap {

struct CommandResult {
  int exitCode = -1;  // 128+signal when killed by a signal
  std::string out;
  std::string err;
  double seconds = 0;
};

// Runs `argv` (argv[0] looked up in PATH) with stdin from /dev/null and
// `extraEnvironment` ("NAME=value") added to ours, and waits for it.
CommandResult runCommand(const std::vector<std::string>& argv, const std::vector<std::string>& extraEnvironment = {});

}  // namespace ibdt::bootstrap
