// bootstrap/backends.h — constructors of the launcher-specific backends,
// called by connectStore(). Each fails with a clear error when its launcher
// cannot be reached, or with kUnsupported when this build lacks it.
#pragma once

#include <memory>

#include "ibdt/store.h"

namespace ibdt::bootstrap {

Result<std::unique_ptr<Store>> connectPmix(Deadline deadline);
Result<std::unique_ptr<Store>> connectPmi1(Deadline deadline);

}  // namespace ibdt::bootstrap
