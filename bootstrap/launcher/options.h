// bootstrap/launcher/options.h — ibdt-run's command line.
#pragma once

#include <string>
#include <vector>

#include "ibdt/status.h"

namespace ibdt::bootstrap {

struct LaunchOptions {
  int ranks = 1;
  int nodes = 1;              // simulated nodes: ranks are spread over them in blocks
  double timeoutSeconds = 0;  // 0: no limit
  bool prefixOutput = true;   // "[rank] " before every line of output
  std::vector<std::string> command;
};

// Parses `ibdt-run [options] [--] program [args...]`. Options end at the
// first word that is not one, so the program's own options pass untouched.
Result<LaunchOptions> parseLaunchOptions(int argc, const char* const* argv);
extern const char* const kLaunchUsage;

}  // namespace ibdt::bootstrap
