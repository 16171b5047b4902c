// connectStore(): picks the bootstrap backend from the environment.
#include <cstdlib>
#include <string>

#include "base/config.h"
#include "base/log.h"
#include "bootstrap/backends.h"
#include "bootstrap/launcher_store.h"
#include "bootstrap/singleton_store.h"
#include "ibdt/store.h"

namespace ibdt::bootstrap {
namespace {

enum class Backend { kAuto, kLauncher, kPmix, kPmi1, kSingleton };

bool hasEnv(const char* name) { return std::getenv(name) != nullptr; }

Backend detect() {
  if (config::isSet("IBDT_RUN_SOCKET")) return Backend::kLauncher;
  if (hasEnv("PMIX_NAMESPACE") && hasEnv("PMIX_RANK")) return Backend::kPmix;
  if (hasEnv("PMI_FD") || hasEnv("PMI_PORT")) return Backend::kPmi1;
  return Backend::kSingleton;
}

Result<std::unique_ptr<Store>> connectLauncher(Deadline deadline) {
  IBDT_ASSIGN_OR_RETURN(std::string socket, config::getString("IBDT_RUN_SOCKET"));
  IBDT_ASSIGN_OR_RETURN(std::string token, config::getString("IBDT_RUN_TOKEN"));
  IBDT_ASSIGN_OR_RETURN(int64_t rank, config::getInt("IBDT_RUN_RANK", 0, INT32_MAX));
  if (socket.empty() || token.empty()) {
    return makeError(Code::kInvalidArgument,
                     "IBDT_BOOTSTRAP=ibdt-run but IBDT_RUN_SOCKET or IBDT_RUN_TOKEN is empty (start the job with "
                     "ibdt-run -n N prog)");
  }
  return LauncherStore::connect(socket, token, static_cast<int>(rank), deadline);
}

}  // namespace

Result<std::unique_ptr<Store>> connectStore() {
  IBDT_ASSIGN_OR_RETURN(int choice, config::getChoice("IBDT_BOOTSTRAP", {"auto", "ibdt-run", "pmix", "pmi1", "singleton"}));
  IBDT_ASSIGN_OR_RETURN(double seconds, config::getDouble("IBDT_BOOTSTRAP_TIMEOUT"));
  Deadline deadline = Deadline::after(std::chrono::duration<double>(seconds));
  auto backend = static_cast<Backend>(choice);
  if (backend == Backend::kAuto) backend = detect();
  Result<std::unique_ptr<Store>> store = makeError(Code::kInternal, "no bootstrap backend chosen");
  switch (backend) {
    case Backend::kLauncher: store = connectLauncher(deadline); break;
    case Backend::kPmix: store = connectPmix(deadline); break;
    case Backend::kPmi1: store = connectPmi1(deadline); break;
    case Backend::kSingleton:
    case Backend::kAuto: store = std::unique_ptr<Store>(new SingletonStore()); break;
  }
  if (!store.isOk()) return store;
  log::setTag(strCat("rank ", (*store)->rank()));
  IBDT_LOG(kDebug, "bootstrap: ", (*store)->backend(), " rank ", (*store)->rank(), "/", (*store)->size(), " node ",
           (*store)->nodeId(), "/", (*store)->numNodes(), " local ", (*store)->localRank(), "/",
           (*store)->localSize());
  return store;
}

}  // namespace ibdt::bootstrap
