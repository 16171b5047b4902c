// collectives/alltoallv_algorithms.h — the alltoallv algorithms' factories;
// `args` were checked by checkAlltoallvArgs() and are owned by the plan.
#pragma once

#include <memory>
#include <optional>

#include "collectives/alltoallv_args.h"
#include "collectives/plan_impl.h"

namespace ibdt::collectives {

// Direct: the pair check on the first run, then the pairwise rounds.
Result<std::unique_ptr<PlanImpl>> makeDirectAlltoallv(Communicator& comm, AlltoallvArgs args, int64_t throttle);

// One-sided writes (docs/alltoall-direct-writes.md), collective: every rank
// calls it, `checked` failed or not, so a bad argument anywhere fails every
// rank. Dense types everywhere: every pair by direct writes; else every
// rank runs makeDirectAlltoallv.
Result<std::unique_ptr<PlanImpl>> makeDirectWriteAlltoallv(Communicator& comm, Result<AlltoallvArgs> checked,
                                                           int64_t throttle);

// In place with limited memory (Hofmann/Rünger, Algorithm 1): `auxBytes` of
// auxiliary memory split into `auxBuffers` buffers.
Result<std::unique_ptr<PlanImpl>> makeInPlaceAlltoallv(Communicator& comm, AlltoallvArgs args, int64_t throttle,
                                                       int64_t auxBytes, int64_t auxBuffers);

// Zero-copy Bruck (alltoallv_bruck.cc): collective init, one basic kind;
// a rank whose `args` failed still takes part, so every rank fails.
Result<std::unique_ptr<PlanImpl>> makeZeroCopyBruckAlltoallv(Communicator& comm, Result<AlltoallvArgs> args);
// The same once the ranks agreed that every type consists of `kind` (the
// auto selection's allreduce did): the count rounds and the plan.
Result<std::unique_ptr<PlanImpl>> buildZeroCopyBruckAlltoallv(Communicator& comm, const AlltoallvArgs& args,
                                                              datatype::BasicKind kind);
// The one basic kind every element of `type` consists of, if there is one.
std::optional<datatype::BasicKind> uniformKind(const datatype::Datatype& type);

// Direct writes once the ranks agreed that every rank's types are dense
// blocks (collective: the key exchange and the lengths' agreement).
Result<std::unique_ptr<PlanImpl>> buildDirectWriteAlltoallv(Communicator& comm, const AlltoallvArgs& args);

}  // namespace ibdt::collectives
