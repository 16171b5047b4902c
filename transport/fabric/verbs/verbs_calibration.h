// transport/fabric/verbs/verbs_calibration.h — what a device can do and what
// it costs, found out when the domain opens.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>

#include "ibdt/fabric.h"

namespace ibdt::fabric::verbs {

// ibv_query_device does not publish the inline limit: create throw-away QPs
// asking for less and less until the device accepts. Returns 0 if none does.
uint32_t probeMaxInline(ibv_context* context, ibv_pd* pd);

// Median cost of ibv_reg_mr + ibv_dereg_mr for 1 page and for kManyPages
// pages of touched memory, fitted to fixedNs + perPageNs * pages.
inline constexpr size_t kManyPages = 256;
RegistrationCost measureRegistrationCost(ibv_pd* pd, size_t pageSize);

// Link rate from the port's width and speed; per-request costs are nominal
// published figures for an RC QP, not measurements.
TransferCost nominalTransferCost(const ibv_port_attr& port);

}  // namespace ibdt::fabric::verbs
