// collectives/alltoall_direct_write.h — alltoall by one-sided writes
// straight into the peers' receive buffers (docs/alltoall-direct-writes.md).
#pragma once

#include <memory>

#include "collectives/alltoall_args.h"
#include "collectives/plan_impl.h"

namespace ibdt::collectives {

// Collective: every rank calls it together (the ranks agree whether the
// arguments allow direct writes and exchange their receive buffers' keys).
// `checked` failed on some rank: every rank fails. Both types dense (one
// run of bytes per block) on every rank: direct writes; else every rank
// falls back to pairwise rounds (`throttle`). kInPlace: kInvalidArgument
// (a peer's write would land on a block not yet sent).
Result<std::unique_ptr<PlanImpl>> makeDirectWriteAlltoall(Communicator& comm, const Result<AlltoallArgs>& checked,
                                                          int64_t throttle);

}  // namespace ibdt::collectives
