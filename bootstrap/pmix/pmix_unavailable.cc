// Built when ibdt is configured without PMIx (IBDT_WITH_PMIX=OFF or libpmix
// missing).
#include "bootstrap/backends.h"

namespace ibdt::bootstrap {

Result<std::unique_ptr<Store>> connectPmix(Deadline) {
  return makeError(Code::kUnsupported,
                   "the job was started by a PMIx launcher, but this ibdt was built without PMIx "
                   "(install libpmix-dev and reconfigure with IBDT_WITH_PMIX=ON)");
}

}  // namespace ibdt::bootstrap
