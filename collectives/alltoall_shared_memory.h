// collectives/alltoall_shared_memory.h — the all-to-all of the ranks of one
// node through one shared-memory segment (docs/alltoall-shared-memory.md).
//
// Every rank packs its blocks for the others into its own row of the
// segment and raises its flag; each rank then copies its column out of the
// others' rows as their flags rise. No message, no credit, no matching: a run is
// two copies of the data and p flag reads, and where ranks outnumber cores
// a rank needs the core about once per run, not once per round.
#pragma once

#include <memory>

#include "collectives/alltoall_args.h"
#include "collectives/plan_impl.h"

namespace ibdt::collectives {

// Collective: every rank calls it together. The ranks agree (one
// allreduce) that every rank's arguments are good, that they name the same
// bytes and signature per block, and that they run on one host; rank 0 then
// creates the segment and the others map it (a broadcast and an
// allreduce). Any failure fails every rank's init with the same cause.
// kInPlace is supported (a rank's row is packed before its buffer is
// overwritten). The communicator must span one node (Communicator::nodeCount).
Result<std::unique_ptr<PlanImpl>> makeSharedMemoryAlltoall(Communicator& comm, const Result<AlltoallArgs>& checked);

// The segment the plan of p ranks with `bytes` per block maps: a flag line
// per rank and two phases of p rows of p blocks (so that a rank may start the
// next run while a slower one still reads this one). 0 when it overflows.
int64_t sharedMemoryAlltoallBytes(int p, int64_t bytes);

}  // namespace ibdt::collectives
