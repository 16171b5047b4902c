#include "bootstrap/backends.h"

namespace ibdt::bootstrap {

Result<std::unique_ptr<Store>> connectPmi1(Deadline) {
  return makeError(Code::kUnsupported, "the PMI-1 backend is not implemented yet");
}

}  // namespace ibdt::bootstrap
