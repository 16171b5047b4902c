#include "transport/fabric/verbs/verbs_provider.h"

#include "transport/fabric/verbs/verbs_device.h"
#include "transport/fabric/verbs/verbs_domain.h"
#include "transport/fabric/verbs/verbs_fork.h"

namespace ibdt::fabric {

ProviderInfo probeVerbs() {
  ProviderInfo info;
  info.name = "verbs";
  auto ports = verbs::listPorts();
  if (!ports.isOk()) {
    info.detail = std::string(ports.status().message());
    return info;
  }
  for (const verbs::PortSummary& port : *ports) {
    info.available = info.available || port.active;
    info.detail += strCat(info.detail.empty() ? "" : "; ", port.text);
  }
  if (!info.available) info.detail = strCat("no active port: ", info.detail);
  info.detail += strCat("; fork safety: ", verbs::forkSafetyMode());
  return info;
}

Result<std::unique_ptr<Domain>> openVerbsDomain(const DomainOptions& options) {
  return verbs::VerbsDomain::open(options);
}

}  // namespace ibdt::fabric
