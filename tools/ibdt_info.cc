// ibdt-info — what this ibdt build and machine offer (cf. ucx_info, ompi_info):
// compiled-in components and the effective configuration. Later layers add
// their providers, devices and measured cost models here.
#include <cstdio>
#include <string>

#include "base/config.h"
#include "bootstrap/backends.h"
#include "build_info.h"

int main() {
  std::printf("ibdt %s\n", IBDT_VERSION_STRING);
  std::printf("components: verbs=%s pmix=%s mpi=%s\n", IBDT_BUILD_VERBS, IBDT_BUILD_PMIX, IBDT_BUILD_MPI);
  auto bootstrap = ibdt::bootstrap::detectedBackend();
  std::printf("bootstrap: %s\n", bootstrap.isOk() ? std::string(*bootstrap).c_str() : bootstrap.status().toString().c_str());
  std::printf("\nconfiguration (IBDT_* environment variables):\n");
  int status = 0;
  for (const auto& knob : ibdt::config::knobs()) {
    auto value = ibdt::config::getString(knob.name);
    const char* origin = ibdt::config::isSet(knob.name) ? "set" : "default";
    std::printf("  %-28s = %-12s (%s)  %s\n", knob.name, value.isOk() ? value->c_str() : "?", origin,
                knob.description);
  }
  std::string unknown = ibdt::config::unknownVariables();
  if (!unknown.empty()) {
    std::printf("\nwarning: unknown IBDT_* variables (typos?): %s\n", unknown.c_str());
    status = 1;
  }
  return status;
}
