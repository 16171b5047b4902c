// collectives/alltoallv_select.h — what kAuto runs for a persistent
// alltoallv (docs/alltoallv.md, "Automatic choice").
//
// Träff/Rougier/Hunold §3.5: "An MPI_Allreduce can be used to find the
// smallest and the largest element size, and based on this, the MPI
// processes can consistently select the desired algorithm." One allreduce
// carries that and what the candidates need agreed anyway (zero-copy
// Bruck: one basic kind on every rank; direct-write: dense blocks
// everywhere), so the chosen algorithm's init does not vote again. The
// alltoall cost model (alltoall_select.h) prices the candidates.
#pragma once

#include <cstdint>
#include <optional>

#include "collectives/alltoall_select.h"
#include "collectives/alltoallv_args.h"
#include "collectives/plan_impl.h"

namespace ibdt::collectives {

// What every rank contributed, reduced.
struct AlltoallvAgreement {
  bool refused = false;  // some rank's arguments failed
  // Packed bytes of one block between two different ranks, over every
  // rank's send and receive blocks.
  int64_t minBlockBytes = 0, maxBlockBytes = 0;
  // The most any rank sends or receives to or from the others in one call.
  int64_t maxRankBytes = 0;
  // Every rank's send and receive types consist of this one basic kind.
  std::optional<datatype::BasicKind> kind;
  bool dense = false;  // every rank's types are dense blocks
  // The smallest AlltoallvOptions::scratchBytes any rank set (0: none).
  int64_t scratchBound = 0;
};

// Collective, one allreduce; `args` null: this rank's arguments failed (it
// still takes part, so every rank learns it).
Result<AlltoallvAgreement> agreeOnAlltoallv(Communicator& comm, const AlltoallvArgs* args, int64_t scratchBytes = 0);

struct AlltoallvChoice {
  AlltoallvAlgorithm algorithm = AlltoallvAlgorithm::kPairwise;
  double predictedNs = 0;
};

// The name Plan::algorithm() reports for a plan of `algorithm`.
std::string_view alltoallvAlgorithmName(AlltoallvAlgorithm algorithm);

// The cheapest of pairwise (priced at the busiest rank's mean block),
// zero-copy Bruck (at the largest block: every block it forwards may be
// that large, so only problems that are not too irregular choose it),
// direct-write and, on one node, shared-memory (both at the mean block),
// those allowed by `agreed` and within its scratch bound (Bruck's
// intermediate blocks estimated as p - 1 of the largest, the segment's
// share as twice the busiest rank's bytes). Pairwise for p = 1 or when no
// block has a byte, never Bruck at p = 2 (as alltoall). A pure function:
// the same on every rank.
AlltoallvChoice selectAlltoallv(const AlltoallCostModel& model, int p, const AlltoallvAgreement& agreed,
                                int nodes = 1);

// kAuto's collective init: agree, choose, build the choice (a rank whose
// arguments failed makes every rank fail).
Result<std::unique_ptr<PlanImpl>> makeAutoAlltoallv(Communicator& comm, Result<AlltoallvArgs> checked,
                                                    const AlltoallvOptions& options);

}  // namespace ibdt::collectives
