// Zero-copy Bruck alltoall (Träff, Rougier, Hunold 2014, Listing 3): the
// modified Bruck schedule (alltoall_bruck_modified.cc, radix 2) with no
// staging copy. In round k, block j (bit k of j set) leaves straight from
// the send buffer (block rank - j) when j has no set bit below k, else from
// where the previous round put it; it is received where
// bruck_zero_copy_placement.cc places it: its own receive block on its last
// hop, else another receive block whose own block arrives later or a slot
// of the intermediate buffer (packed, in the receive type's signature). So
// a block never sits where the same round receives, the intermediate buffer
// holds fewer than ⌊p/2⌋ blocks, and each round's send and receive is one
// struct type over the three buffers, built at init (addresses relative to
// the receive buffer). Only this rank's own block is copied. In place
// (kInPlace) the rounds would overwrite blocks of R not yet sent, so a run
// first packs R into p staging blocks and sends the fresh blocks from there.
#include "collectives/alltoall_bruck.h"
#include "collectives/bruck_zero_copy_placement.h"

#include <cstdint>

namespace ibdt::collectives {
namespace {

using datatype::Datatype;

// One block of a round as a piece of the round's struct type.
void addPiece(StructPieces& pieces, const BruckPlace& place, const AlltoallArgs& args, const std::byte* intermediate,
              const Datatype& packed, int size, int rank, int j) {
  switch (place.buffer) {
    case BruckPlace::Buffer::kSend:
      pieces.add(args.sendcount, args.sendBlock((rank - j + size) % size), args.recvbuf, args.sendtype);
      return;
    case BruckPlace::Buffer::kReceive:
      pieces.add(args.recvcount, args.recvBlock(static_cast<int>((rank + place.index) % size)), args.recvbuf,
                 args.recvtype);
      return;
    case BruckPlace::Buffer::kIntermediate:
      pieces.add(args.recvcount, intermediate + place.index * args.bytes, args.recvbuf, packed);
      return;
  }
}

Status addRound(RoundsPlan& plan, const AlltoallArgs& args, const Datatype& packed,
                const BruckPlacement& placement, int size, int rank, int round) {
  const int k = 1 << round;
  const std::byte* intermediate = plan.scratch().data();
  StructPieces send, recv;
  for (int j : bruckBlocks(size, 2, k, 1)) {
    const auto r = static_cast<size_t>(round), block = static_cast<size_t>(j);
    addPiece(send, placement.sendFrom[r][block], args, intermediate, packed, size, rank, j);
    addPiece(recv, placement.receiveInto[r][block], args, intermediate, packed, size, rank, j);
  }
  IBDT_ASSIGN_OR_RETURN(Datatype sendType, send.build());
  IBDT_ASSIGN_OR_RETURN(Datatype recvType, recv.build());
  return plan.addExchange(plan.addRound(), (rank - k + size) % size, args.recvbuf, 1, sendType, (rank + k) % size,
                          args.recvbuf, 1, recvType);
}

}  // namespace

Result<std::unique_ptr<PlanImpl>> makeZeroCopyBruckAlltoall(Communicator& comm, const AlltoallArgs& args) {
  const int size = comm.size(), rank = comm.rank();
  auto plan = std::make_unique<RoundsPlan>(comm, "bruck-zero-copy");
  if (args.bytes == 0) {
    for (int k = 1; k < size; k <<= 1) {
      IBDT_RETURN_IF_ERROR(plan->addEmptyExchange(plan->addRound(), (rank - k + size) % size, (rank + k) % size));
    }
    return std::unique_ptr<PlanImpl>(std::move(plan));
  }
  // The intermediate slots, and in place p more for the send blocks.
  const BruckPlacement placement = placeZeroCopyBruck(size);
  const int64_t slots = placement.intermediateSlots;
  const int64_t staged = args.inPlace ? size : 0;
  plan->scratch().resize(static_cast<size_t>((slots + staged) * args.bytes));
  IBDT_ASSIGN_OR_RETURN(Datatype packed, packedType(args.recvtype));
  AlltoallArgs from = args;
  if (args.inPlace) {  // rounds write R before every block left it: send from a packed copy
    from.sendbuf = plan->scratch().data() + slots * args.bytes;
    from.sendtype = packed;
    from.sendcount = args.recvcount;
    from.sendStride = args.bytes;
    IBDT_ASSIGN_OR_RETURN(LocalCopy stage, makeCopy(args.recvtype, args.recvcount * size, args.recvbuf, packed,
                                                    args.recvcount * size, plan->scratch().data() + slots * args.bytes,
                                                    0, size * args.bytes));
    plan->prologue().push_back(std::move(stage));
  } else {
    IBDT_ASSIGN_OR_RETURN(LocalCopy own, makeCopy(args.sendtype, args.sendcount, args.sendBlock(rank), args.recvtype,
                                                  args.recvcount, args.recvBlock(rank), 0, args.bytes));
    plan->prologue().push_back(std::move(own));
  }
  for (int round = 0; round < static_cast<int>(placement.sendFrom.size()); ++round) {
    IBDT_RETURN_IF_ERROR(addRound(*plan, from, packed, placement, size, rank, round));
  }
  return std::unique_ptr<PlanImpl>(std::move(plan));
}

}  // namespace ibdt::collectives
