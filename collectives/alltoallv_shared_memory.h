// collectives/alltoallv_shared_memory.h — the alltoallv of the ranks of one
// node through one shared-memory segment (docs/alltoall-shared-memory.md,
// "Alltoallv and in place").
//
// The alltoall's scheme (alltoall_shared_memory.h) with rows of different
// lengths: rank r's row holds its packed blocks for the others, back to
// back; the ranks learn at init where in each row their block lies. In
// place, every outgoing block (its own included) is packed into the row
// before any incoming block overwrites the buffer, so counts and
// displacements need no symmetry and the extra memory is the rank's share
// of the segment: a flag line and two rows of its outgoing bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "collectives/alltoallv_args.h"
#include "collectives/plan_impl.h"

namespace ibdt::collectives {

// Collective: every rank calls it together, `checked` failed or not. One
// allgather agrees that every rank's arguments are good, that all run on
// one host (and the communicator spans one node) and how long each row is;
// a pairwise exchange at init checks every pair's bytes and signature (a
// mismatch fails every rank's init, naming the pair); rank 0 then creates
// the segment and the others map it. Every rank returns the same verdict.
// `inPlaceBudget`: the auxiliary memory the caller allows in place; when
// some rank's two rows would exceed its budget (its flag line counts as
// bookkeeping, as the in-place algorithm's O(p) does), every rank
// returns null (declined, nothing was sent but the agreement) so that the
// caller builds the limited-memory in-place algorithm instead.
Result<std::unique_ptr<PlanImpl>> makeSharedMemoryAlltoallv(Communicator& comm, const Result<AlltoallvArgs>& checked,
                                                            std::optional<int64_t> inPlaceBudget = std::nullopt);

// The share of the segment a rank whose blocks for the others (and in
// place for itself) total `rowBytes` maps for itself: its flag line and its
// two rows.
int64_t sharedMemoryAlltoallvShare(int64_t rowBytes);

}  // namespace ibdt::collectives
