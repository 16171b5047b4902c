// transport/messaging/eager_budget.h — how many eager credits each peer gets
// so that a rank's eager receive buffers stay within IBDT_MSG_EAGER_MEMORY.
//
// Every endpoint of a Context (one per rank of the job, itself included)
// holds credits + CreditFlow::kReserveSlots posted receive buffers of one
// slot each. Without a bound that is IBDT_MSG_CREDITS x slot per peer, 1.1
// MiB at the defaults, so a rank's eager memory grew with the job (143 MiB
// at 128 ranks). The budget is divided evenly over the job's possible peers
// at init: every rank computes the same count from the same job size and
// knobs, as it already must for IBDT_MSG_CREDITS and IBDT_MSG_EAGER_LIMIT, so
// no handshake is needed. Where even the floor of credits would not fit
// (above ~85 ranks at 16 MiB and 32 KiB), the eager limit is halved instead,
// down to kMinBudgetEagerLimit: larger messages then travel as pipelined
// fragments, which need no more buffers. This is the per-peer step towards
// a shared eager pool (docs/many-ranks.md).
#pragma once

#include <cstdint>

#include "ibdt/status.h"
#include "transport/messaging/wire.h"

namespace ibdt::messaging {

// One eager buffer: a header, an envelope and up to `eagerLimit` bytes;
// also the largest control message.
inline uint64_t eagerSlotBytes(int64_t eagerLimit) {
  return sizeof(wire::Header) + sizeof(wire::Envelope) + static_cast<uint64_t>(eagerLimit);
}

// The fewest credits a peer may have: pipelined eager (and every protocol
// whose messages need a credit each) makes progress with two, one in flight
// while the other is reposted and returned (tests run that way).
inline constexpr uint32_t kMinEagerCredits = 2;

// Credits per peer for `ranks` endpoints of `slotBytes` buffers each, within
// `budgetBytes` (0: no bound), at most `maxCredits` (IBDT_MSG_CREDITS), at
// least kMinEagerCredits (then the floor, not the budget, bounds memory).
uint32_t eagerCreditsWithin(uint64_t budgetBytes, uint64_t slotBytes, int ranks, uint32_t maxCredits);

// The budget lowers the eager limit no further than this (a limit set
// below it is kept).
inline constexpr int64_t kMinBudgetEagerLimit = 4096;

// Credits per peer and the eager limit within `budgetBytes`: the limit
// stays `eagerLimit` unless the floor of credits at it exceeds the budget;
// then it is halved while that holds and the half is at least
// kMinBudgetEagerLimit, and the credits are those of the lowered limit.
struct EagerShape {
  uint32_t credits = 0;
  int64_t eagerLimit = 0;
};
EagerShape eagerShapeWithin(uint64_t budgetBytes, int64_t eagerLimit, int ranks, uint32_t maxCredits);

// IBDT_MSG_EAGER_POOL: the budget as one pool of `slots` buffers. Every
// endpoint keeps `guaranteed` credits (and the reserve) for good: all of
// IBDT_MSG_CREDITS where the budget holds them for every rank, else half the
// budget spread evenly (at least kMinEagerCredits); the rest is granted on
// demand up to `ceiling` (eager_pool.h). Where even the guaranteed shares
// exceed the budget the pool is their sum, as the floor bounds memory then.
struct EagerPoolShape {
  uint32_t guaranteed = 0;
  uint32_t ceiling = 0;
  uint64_t slots = 0;
};
EagerPoolShape eagerPoolWithin(uint64_t budgetBytes, uint64_t slotBytes, int ranks, uint32_t maxCredits);

// IBDT_MSG_EAGER_POOL (off by default); read beside IBDT_MSG_EAGER_MEMORY.
Result<bool> eagerPoolFromEnvironment();

// IBDT_MSG_EAGER_MEMORY in bytes (0: no bound); read where the job size is
// known (ContextImpl::init), so Options built in code honour it too.
Result<uint64_t> eagerBudgetFromEnvironment();

}  // namespace ibdt::messaging
