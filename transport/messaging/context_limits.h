// transport/messaging/context_limits.h — what a Context's set-up derives
// before it creates anything: the options checked, the eager credits per
// peer within IBDT_MSG_EAGER_MEMORY, the spin budget of its waits and the
// provider's limits it works within.
#pragma once

#include <cstdint>

#include "ibdt/fabric.h"
#include "ibdt/messaging.h"
#include "transport/messaging/eager_budget.h"
#include "transport/messaging/wire.h"

namespace ibdt::messaging {

struct ProviderLimits {
  uint32_t sendQueueDepth = 0;  // sends (and READs) outstanding per peer
  uint32_t recvDepth = 0;       // receive slots per peer: eager credits plus the reserve
  // Every endpoint's receives come from one shared queue of this many
  // (ranks x recvDepth); 0: each endpoint has its own (receive_pool.h).
  uint32_t sharedReceiveDepth = 0;
  uint32_t maxSge = 1;
  uint64_t maxWrBytes = 0;
};

inline size_t eagerSlotSize(const Options& options) { return eagerSlotBytes(options.eagerLimit); }

// The bootstrap and options a Context can run with.
Status checkSetup(const Bootstrap& bootstrap, const Options& options);
// Busy-poll iterations before a wait yields (base/backoff.h).
uint32_t spinsFor(const Bootstrap& bootstrap, const Options& options);
// Eager credits per peer and the eager limit within IBDT_MSG_EAGER_MEMORY:
// every part of the Context uses them (buffers posted, credits granted, the
// eager/pipelined choice, the tuned pipeline window), and every rank
// derives them from the same job size and knobs.
Result<EagerShape> eagerShapeFor(const Bootstrap& bootstrap, const Options& options);
// The provider's limits for `eagerCredits` receive slots of `slotSize` bytes.
Result<ProviderLimits> readProviderLimits(const fabric::Caps& caps, uint32_t eagerCredits, size_t slotSize,
                                          int64_t eagerLimit);
// Whether the `ranks` endpoints of a Context over `domain` share one receive
// queue (receive_pool.h): where the provider has one, above
// IBDT_MSG_SRQ_RANKS ranks (0: always), or always when the provider shares
// every receive queue anyway (verbs: IBDT_VERBS_SRQ=1). Sets
// limits.sharedReceiveDepth.
Status chooseSharedReceives(const fabric::Domain& domain, int ranks, ProviderLimits& limits);

}  // namespace ibdt::messaging
