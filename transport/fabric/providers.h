// transport/fabric/providers.h — the entry points each provider implements
// for the registry (registry.cc). Internal; users call openDomain().
#pragma once

#include <memory>

#include "ibdt/fabric.h"

namespace ibdt::fabric {

namespace shm {
ProviderInfo probe();
Result<std::unique_ptr<Domain>> open(const DomainOptions& options);
}  // namespace shm

// Compiled in when transport/fabric/verbs defines IBDT_FABRIC_HAVE_VERBS.
namespace verbs {
ProviderInfo probe();
Result<std::unique_ptr<Domain>> open(const DomainOptions& options);
}  // namespace verbs

}  // namespace ibdt::fabric
