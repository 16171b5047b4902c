// The verbs provider's entry points for the registry (transport/fabric/providers.h).
#include "transport/fabric/providers.h"
#include "transport/fabric/verbs/verbs_device.h"
#include "transport/fabric/verbs/verbs_domain.h"
#include "transport/fabric/verbs/verbs_fork.h"

namespace ibdt::fabric::verbs {

// Lists the device ports ("rxe0:1 active Ethernet mtu 1024"), or why there are none.
ProviderInfo probe() {
  ProviderInfo info;
  info.name = "verbs";
  auto ports = listPorts();
  if (!ports.isOk()) {
    info.detail = std::string(ports.status().message());
    return info;
  }
  for (const PortSummary& port : *ports) {
    info.available = info.available || port.active;
    info.detail += strCat(info.detail.empty() ? "" : "; ", port.text);
  }
  if (!info.available) info.detail = strCat("no active port: ", info.detail);
  info.detail += strCat("; fork safety: ", forkSafetyMode());
  return info;
}

// Opens options.device ("mlx5_0:1", or "rxe0" for its first active port),
// else IBDT_VERBS_DEVICE, else the first active port of any device.
Result<std::unique_ptr<Domain>> open(const DomainOptions& options) { return VerbsDomain::open(options); }

}  // namespace ibdt::fabric::verbs
