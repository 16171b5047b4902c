// Basic Bruck alltoall (Bruck et al. 1997; Träff, Rougier, Hunold 2014,
// Listing 1), with R = the receive buffer:
//   1. R[j] = this rank's block for rank + j (a rotation of the send buffer);
//   2. round k = 1, 2, 4, ... < p: every R[j] with bit k of j set goes to
//      rank + k, described by one bounded vector of the receive type; the
//      message from rank - k lands packed in an intermediate buffer and is
//      unpacked with the same bounded vector once the round's send left;
//   3. R[j] now holds the block of rank - j: it moves to R[rank - j]. That
//      permutation is an involution (j <-> rank - j), done as swaps through
//      the intermediate buffer: half the pairs packed out, their partners
//      copied over, the packed half unpacked into the partners.
// The intermediate buffer holds the largest round's blocks (at most p/2 + 1),
// packed in the receive type's signature. In place (kInPlace), step 1 is a
// rotation of R done as three reversals, swaps through the same buffer.
#include "collectives/alltoall_bruck.h"

namespace ibdt::collectives {
namespace {

using datatype::Datatype;

// Blocks of [k, p) whose index has bit k set.
int64_t blocksWithBit(int size, int k) { return static_cast<int64_t>(bruckBlocks(size, 2, k, 1).size()); }

// Step 1. In place: a left rotation by `rank` as three reversals.
Status addRotation(RoundsPlan& plan, const AlltoallArgs& args, const Datatype& packed, int size, int rank) {
  if (args.inPlace) {
    for (const BlockPairs& pairs : {reversalPairs(0, rank), reversalPairs(rank, size), reversalPairs(0, size)}) {
      IBDT_RETURN_IF_ERROR(addBlockSwaps(plan.prologue(), args, packed, plan.scratch().data(), pairs));
    }
    return Status::ok();
  }
  IBDT_ASSIGN_OR_RETURN(LocalCopy high, makeCopy(args.sendtype, args.sendcount * size, args.sendBlock(rank),
                                                 args.recvtype, args.recvcount * size, args.recvBlock(0), 0,
                                                 (size - rank) * args.bytes));
  plan.prologue().push_back(std::move(high));
  if (rank == 0) return Status::ok();
  IBDT_ASSIGN_OR_RETURN(LocalCopy low, makeCopy(args.sendtype, args.sendcount * size, args.sendBlock(0), args.recvtype,
                                                args.recvcount * size, args.recvBlock(size - rank), 0,
                                                rank * args.bytes));
  plan.prologue().push_back(std::move(low));
  return Status::ok();
}

// Step 3 as swaps of R[j] and R[rank - j].
Status addPermutation(RoundsPlan& plan, const AlltoallArgs& args, const Datatype& packed, int size, int rank) {
  BlockPairs pairs;
  for (int j = 0; j < size; ++j) {
    const int partner = ((rank - j) % size + size) % size;
    if (j < partner) pairs.emplace_back(j, partner);
  }
  return addBlockSwaps(plan.epilogue(), args, packed, plan.scratch().data(), pairs);
}

}  // namespace

Result<std::unique_ptr<PlanImpl>> makeBasicBruckAlltoall(Communicator& comm, const AlltoallArgs& args) {
  const int size = comm.size(), rank = comm.rank();
  auto plan = std::make_unique<RoundsPlan>(comm, "bruck-basic");
  if (args.bytes == 0) {
    for (int k = 1; k < size; k <<= 1) {
      IBDT_RETURN_IF_ERROR(plan->addEmptyExchange(plan->addRound(), (rank + k) % size, (rank - k + size) % size));
    }
    return std::unique_ptr<PlanImpl>(std::move(plan));
  }
  int64_t most = size / 2;  // the permutation's (and in place, the rotation's) pairs
  for (int k = 1; k < size; k <<= 1) most = std::max(most, blocksWithBit(size, k));
  plan->scratch().resize(static_cast<size_t>(most * args.bytes));
  std::byte* stage = plan->scratch().data();
  IBDT_ASSIGN_OR_RETURN(Datatype packed, packedType(args.recvtype));
  IBDT_RETURN_IF_ERROR(addRotation(*plan, args, packed, size, rank));
  const int64_t count = args.recvcount;
  for (int k = 1; k < size; k <<= 1) {
    IBDT_ASSIGN_OR_RETURN(Datatype bounded,
                          Datatype::boundedVector((size - k) * count, k * count, 2 * k * count, args.recvtype));
    IBDT_RETURN_IF_ERROR(bounded.commit());
    const int64_t blocks = blocksWithBit(size, k);
    RoundsPlan::Round& round = plan->addRound();
    IBDT_RETURN_IF_ERROR(plan->addExchange(round, (rank + k) % size, args.recvBlock(k), 1, bounded,
                                           (rank - k + size) % size, stage, blocks * count, packed));
    IBDT_ASSIGN_OR_RETURN(LocalCopy unpack, makeCopy(packed, blocks * count, stage, bounded, 1, args.recvBlock(k), 0,
                                                     blocks * args.bytes));
    round.unpacks.push_back(std::move(unpack));
  }
  IBDT_RETURN_IF_ERROR(addPermutation(*plan, args, packed, size, rank));
  return std::unique_ptr<PlanImpl>(std::move(plan));
}

}  // namespace ibdt::collectives
