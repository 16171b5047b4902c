// transport/fabric/verbs/verbs_status.h — rdma-core results at the boundary.
//
// Work-completion statuses become CompletionStatus; errno values of verbs
// calls become Status codes with the call and the device in the message.
#pragma once

#include <infiniband/verbs.h>

#include <string_view>

#include "ibdt/fabric.h"
#include "ibdt/status.h"

namespace ibdt::fabric::verbs {

CompletionStatus translateWcStatus(ibv_wc_status status);

// `call` failed with `error` (an errno value) on `device`; ENOMEM becomes
// kResource, EINVAL kInvalidArgument, everything else kSystem.
Status verbsCallError(std::string_view call, int error, std::string_view device);

}  // namespace ibdt::fabric::verbs
