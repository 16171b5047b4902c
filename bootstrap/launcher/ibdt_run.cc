// ibdt-run — the embedded launcher: `ibdt-run -n N [--] program [args...]`.
#include <cstdio>

#include "bootstrap/launcher/job.h"
#include "bootstrap/launcher/options.h"

int main(int argc, char** argv) {
  auto options = ibdt::bootstrap::parseLaunchOptions(argc, argv);
  if (!options.isOk()) {
    bool help = options.status().code() == ibdt::Code::kCancelled;
    if (!help) std::fprintf(stderr, "ibdt-run: %s\n", std::string(options.status().message()).c_str());
    std::fputs(ibdt::bootstrap::kLaunchUsage, help ? stdout : stderr);
    return help ? 0 : 2;
  }
  ibdt::bootstrap::Job job(std::move(*options));
  return job.run();
}
