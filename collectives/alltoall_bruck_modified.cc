// Modified Bruck alltoall (Träff, Rougier, Hunold 2014, Listing 2),
// generalised to radix r. R = the receive buffer, indices mod p:
//   1. R[rank + j] = this rank's block for rank - j (one typed copy through
//      a block list of the send type);
//   2. for each digit position (weight w = 1, r, r^2, ... < p) and digit
//      value v = 1 .. r-1, the blocks R[rank + j] whose digit of weight w in
//      j is v go to rank - v*w as one circular vector of the receive type,
//      and the same blocks arrive from rank + v*w, packed in an intermediate
//      buffer, unpacked with that circular vector once the round's sends
//      left. A block keeps its relative index j and moves v*w ranks down
//      per digit, so after the last round R[x] holds rank x's block: no
//      final permutation.
// The r - 1 messages of a round move disjoint blocks, so they are in
// flight at once; the intermediate buffer holds one round's blocks. In place
// (kInPlace), step 1 swaps blocks through the same buffer.
#include <string>

#include "collectives/alltoall_bruck.h"

namespace ibdt::collectives {

using datatype::Datatype;

namespace {

// Step 1: R[rank + j] = send block rank - j, i.e. R[x] = send[2 rank - x].
// In place that is an involution (x <-> 2 rank - x): swaps of blocks.
Status addReversal(RoundsPlan& plan, const AlltoallArgs& args, const Datatype& packed, int size, int rank) {
  if (args.inPlace) {
    BlockPairs pairs;
    for (int x = 0; x < size; ++x) {
      const int partner = static_cast<int>(((2 * int64_t{rank} - x) % size + size) % size);
      if (x < partner) pairs.emplace_back(x, partner);
    }
    return addBlockSwaps(plan.prologue(), args, packed, plan.scratch().data(), pairs);
  }
  std::vector<int64_t> order;
  for (int x = 0; x < size; ++x) order.push_back(((2 * int64_t{rank} - x) % size + size) % size);
  IBDT_ASSIGN_OR_RETURN(Datatype reversed, blockList(order, args.sendStride, args.sendcount, args.sendtype));
  IBDT_ASSIGN_OR_RETURN(LocalCopy copy, makeCopy(reversed, 1, args.sendbuf, args.recvtype, args.recvcount * size,
                                                 args.recvbuf, 0, size * args.bytes));
  plan.prologue().push_back(std::move(copy));
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<PlanImpl>> makeModifiedBruckAlltoall(Communicator& comm, const AlltoallArgs& args,
                                                            int64_t radix) {
  const int size = comm.size(), rank = comm.rank();
  if (radix < 2) return makeError(Code::kInvalidArgument, "alltoall (bruck): radix ", radix, " (must be >= 2)");
  auto plan = std::make_unique<RoundsPlan>(comm, radix == 2 ? "bruck-modified" : strCat("bruck-radix-", radix));
  radix = std::min<int64_t>(radix, std::max(size, 2));  // r >= p: one round of p - 1 messages
  const int64_t count = args.recvcount;
  int64_t most = args.inPlace ? size / 2 : 0;  // blocks of the largest round (in place: of the swaps)
  for (int64_t weight = 1; weight < size; weight *= radix) {
    int64_t blocks = 0;
    for (int64_t digit = 1; digit < radix && digit * weight < size; ++digit) {
      blocks += static_cast<int64_t>(bruckBlocks(size, radix, weight, digit).size());
    }
    most = std::max(most, blocks);
  }
  plan->scratch().resize(static_cast<size_t>(most * args.bytes));
  Datatype packed;
  if (args.bytes > 0) {
    IBDT_ASSIGN_OR_RETURN(packed, packedType(args.recvtype));
    IBDT_RETURN_IF_ERROR(addReversal(*plan, args, packed, size, rank));
  }
  for (int64_t weight = 1; weight < size; weight *= radix) {
    RoundsPlan::Round& round = plan->addRound();
    std::byte* stage = plan->scratch().data();
    for (int64_t digit = 1; digit < radix && digit * weight < size; ++digit) {
      const int64_t shift = digit * weight;
      const int to = static_cast<int>((rank - shift % size + size) % size), from = static_cast<int>((rank + shift) % size);
      if (args.bytes == 0) {
        IBDT_RETURN_IF_ERROR(plan->addEmptyExchange(round, to, from));
        continue;
      }
      const int64_t blocks = static_cast<int64_t>(bruckBlocks(size, radix, weight, digit).size());
      IBDT_ASSIGN_OR_RETURN(Datatype circular,
                            Datatype::circularVector(size * count, ((rank + shift) % size) * count,
                                                     (size - shift) * count, weight * count,
                                                     radix * weight * count, args.recvtype));
      IBDT_RETURN_IF_ERROR(circular.commit());
      IBDT_RETURN_IF_ERROR(plan->addExchange(round, to, args.recvbuf, 1, circular, from, stage, blocks * count, packed));
      IBDT_ASSIGN_OR_RETURN(LocalCopy unpack, makeCopy(packed, blocks * count, stage, circular, 1, args.recvbuf, 0,
                                                       blocks * args.bytes));
      round.unpacks.push_back(std::move(unpack));
      stage += blocks * args.bytes;
    }
  }
  return std::unique_ptr<PlanImpl>(std::move(plan));
}

}  // namespace ibdt::collectives
