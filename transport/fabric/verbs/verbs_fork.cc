#include "transport/fabric/verbs/verbs_fork.h"

#include <infiniband/verbs.h>

#include <cstring>
#include <mutex>

#include "base/log.h"

namespace ibdt::fabric::verbs {

void ensureForkSafety() {
  static std::once_flag once;
  std::call_once(once, [] {
    ibv_fork_status status = ibv_is_fork_initialized();
    if (status == IBV_FORK_UNNEEDED || status == IBV_FORK_ENABLED) return;
    if (int rc = ibv_fork_init(); rc != 0) {
      IBDT_LOG(kWarn, "verbs: ibv_fork_init failed (", std::strerror(rc),
               "): a fork() after memory registration may corrupt the parent's RDMA buffers");
    }
  });
}

std::string forkSafetyMode() {
  switch (ibv_is_fork_initialized()) {
    case IBV_FORK_UNNEEDED: return "kernel (ibv_fork_init unneeded)";
    case IBV_FORK_ENABLED: return "ibv_fork_init";
    default: return "disabled";
  }
}

}  // namespace ibdt::fabric::verbs
