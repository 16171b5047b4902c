// transport/fabric/verbs/verbs_fork.h — fork() and registered memory.
//
// Decision: ibdt calls ibv_fork_init() once, before its first registration,
// unless rdma-core reports that the kernel makes it unneeded (Linux >= 5.13
// copies pinned pages at fork, so parent and child both stay correct). With
// ibv_fork_init() on older kernels, registered buffers are not inherited: a
// child must not touch memory the parent registered (it is unmapped there),
// and only the parent may use the verbs objects. ibdt's launchers and tests
// fork before they open a domain. RDMAV_FORK_SAFE=1 in the environment has
// the same effect and is honoured by rdma-core itself.
#pragma once

#include <string>

namespace ibdt::fabric::verbs {

// Idempotent; logs a warning when fork safety cannot be enabled.
void ensureForkSafety();
// "kernel (unneeded)", "ibv_fork_init" or "disabled" — for probe output.
std::string forkSafetyMode();

}  // namespace ibdt::fabric::verbs
