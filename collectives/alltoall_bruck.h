// collectives/alltoall_bruck.h — the Bruck alltoall family (Träff, Rougier,
// Hunold 2014): ceil(log_r p) rounds instead of pairwise's p - 1, each block
// forwarded through up to log_r p ranks. Each builder compiles into a
// RoundsPlan; `args` were checked by checkAlltoallArgs().
#pragma once

#include <memory>

#include "collectives/alltoall_args.h"
#include "collectives/alltoall_rounds.h"
#include "collectives/alltoall_schedule.h"  // bruckBlocks()

namespace ibdt::collectives {

// Listing 1: bounded vectors out of the receive buffer, a rotation before
// and a permutation after the rounds.
Result<std::unique_ptr<PlanImpl>> makeBasicBruckAlltoall(Communicator& comm, const AlltoallArgs& args);
// Listing 2 with radix r: circular vectors, r - 1 messages per round, no
// final permutation. r = 2 is "bruck-modified", else "bruck-radix-<r>".
Result<std::unique_ptr<PlanImpl>> makeModifiedBruckAlltoall(Communicator& comm, const AlltoallArgs& args,
                                                            int64_t radix);
// Listing 3: struct types over the send, receive and intermediate buffers;
// nothing copied but this rank's own block.
Result<std::unique_ptr<PlanImpl>> makeZeroCopyBruckAlltoall(Communicator& comm, const AlltoallArgs& args);

}  // namespace ibdt::collectives
