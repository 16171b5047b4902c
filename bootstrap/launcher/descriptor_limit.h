// bootstrap/launcher/descriptor_limit.h — ibdt-run's file descriptor budget.
//
// The launcher holds about three descriptors per rank (its store connection
// and, with prefixed output, two pipes): at the usual soft limit of 1024 that
// is about 340 ranks. It raises its soft limit to the hard limit, gives the
// ranks the limit they would have had, and refuses a job that cannot fit
// with an error naming the limit (never a spin on EMFILE).
#pragma once

#include <sys/resource.h>

#include "bootstrap/launcher/options.h"
#include "ibdt/status.h"

namespace ibdt::bootstrap {

// Raises the soft RLIMIT_NOFILE to the hard one; returns the limit before.
Result<rlimit> raiseDescriptorLimit();
// Descriptors the launcher needs for `options` beyond those it holds already.
long descriptorsNeeded(const LaunchOptions& options);
// kResource naming the limit when the job cannot fit in the descriptors
// still free (counted in /proc/self/fd).
Status checkDescriptorBudget(const LaunchOptions& options);

}  // namespace ibdt::bootstrap
