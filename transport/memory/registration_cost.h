// transport/memory/registration_cost.h — the registration cost model
// cost(pages) = fixedNs + perPageNs * pages, measured on a provider.
#pragma once

#include "ibdt/fabric.h"
#include "ibdt/status.h"

namespace ibdt::memory {

// Registers and deregisters a scratch mapping (pages touched first, as a
// user buffer would be) of 1 page and of `largePages` pages, `reps` times
// each, and fits the model through the two medians. Both terms are clamped
// at zero (timer noise on a provider whose registration is nearly free).
Result<fabric::RegistrationCost> measureRegistrationCost(fabric::Domain& domain, size_t largePages = 256,
                                                         int reps = 9);

// The model to plan with: what the provider publishes in caps().registration
// when it publishes one (non-zero), else a measurement.
Result<fabric::RegistrationCost> registrationCostOf(fabric::Domain& domain);

}  // namespace ibdt::memory
