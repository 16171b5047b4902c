// tests/bootstrap/run_command.h — runs a command, captures its output.
#pragma once

#include <string>
#include <vector>

namespace ibdt::test {

struct CommandResult {
  int exitCode = -1;  // 128+signal when killed by a signal
  std::string out;
  std::string err;
  double seconds = 0;
};

// Runs `argv` with stdin from /dev/null and waits for it.
CommandResult runCommand(const std::vector<std::string>& argv);

}  // namespace ibdt::test
