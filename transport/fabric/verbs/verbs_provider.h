// transport/fabric/verbs/verbs_provider.h — the rdma-core (libibverbs) provider.
//
// The two entry points the provider registry in transport/fabric/ calls. They
// are compiled only when rdma-core is found (IBDT_HAVE_VERBS); nothing outside
// transport/fabric/verbs/ sees a verbs header.
#pragma once

#include <memory>

#include "ibdt/fabric.h"

namespace ibdt::fabric {

// Lists the RDMA devices and says whether one has an active port
// ("rxe0:1 RoCE v2 active mtu 1024"), or why the provider is unavailable.
ProviderInfo probeVerbs();

// Opens options.device ("mlx5_0:1", "rxe0" = its first active port), else
// IBDT_VERBS_DEVICE, else the first active port of any device.
Result<std::unique_ptr<Domain>> openVerbsDomain(const DomainOptions& options);

}  // namespace ibdt::fabric
