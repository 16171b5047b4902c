// Zero-copy Bruck alltoall (Träff, Rougier, Hunold 2014, Listing 3): the
// modified Bruck schedule (alltoall_bruck_modified.cc, radix 2) with no
// staging copy. In round k, block j (bit k of j set) is
//   * received into the receive buffer at rank + j when the number of set
//     bits of j at k and above is odd (the last hop lands it in place), else
//     into slot j of the intermediate buffer (packed, in the receive type's
//     signature);
//   * sent straight from the send buffer (block rank - j) when j has no set
//     bit below k (it has not moved yet), else from where the previous round
//     put it: the intermediate buffer when the block is received into the
//     receive buffer this round, the receive buffer otherwise.
// So a block never sits where the same round receives, and each round's
// send and receive is one struct type over the three buffers, built at init
// (absolute addresses relative to the receive buffer). Only this rank's own
// block is copied. In place (kInPlace) the rounds would overwrite blocks of
// R not yet sent, so a run first packs R into p staging blocks and sends the
// fresh blocks from there.
#include "collectives/alltoall_bruck.h"

#include <bit>
#include <cstdint>

namespace ibdt::collectives {
namespace {

using datatype::Datatype;

// The pieces of one struct type, displacements relative to `base`.
struct Pieces {
  std::vector<int64_t> counts, displs;
  std::vector<Datatype> types;

  void add(int64_t count, const void* at, const std::byte* base, const Datatype& type) {
    counts.push_back(count);
    displs.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(at) - reinterpret_cast<uintptr_t>(base)));
    types.push_back(type);
  }
  Result<Datatype> build() const {
    IBDT_ASSIGN_OR_RETURN(Datatype type, Datatype::structType(counts, displs, types));
    IBDT_RETURN_IF_ERROR(type.commit());
    return type;
  }
};

Status addRound(RoundsPlan& plan, const AlltoallArgs& args, const Datatype& packed, int size, int rank, int k) {
  std::byte* base = args.recvbuf;
  std::byte* inter = plan.scratch().data();
  Pieces send, recv;
  for (int j : bruckBlocks(size, 2, k, 1)) {
    const int64_t higher = std::popcount(static_cast<unsigned>(j) & ~(static_cast<unsigned>(k) - 1));
    const bool intoRecvbuf = higher % 2 == 1;
    const bool fresh = (j & (k - 1)) == 0;
    const int dest = (rank - j + size) % size, source = (rank + j) % size;
    if (intoRecvbuf) {
      recv.add(args.recvcount, args.recvBlock(source), base, args.recvtype);
    } else {
      recv.add(args.recvcount, inter + j * args.bytes, base, packed);
    }
    if (fresh) {
      send.add(args.sendcount, args.sendBlock(dest), base, args.sendtype);
    } else if (intoRecvbuf) {
      send.add(args.recvcount, inter + j * args.bytes, base, packed);
    } else {
      send.add(args.recvcount, args.recvBlock(source), base, args.recvtype);
    }
  }
  IBDT_ASSIGN_OR_RETURN(Datatype sendType, send.build());
  IBDT_ASSIGN_OR_RETURN(Datatype recvType, recv.build());
  return plan.addExchange(plan.addRound(), (rank - k + size) % size, base, 1, sendType, (rank + k) % size, base, 1,
                          recvType);
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
  // Slot j for block j (the open problem: p/2), and in place p more for the send blocks.
  plan->scratch().resize(static_cast<size_t>((args.inPlace ? 2 : 1) * size * args.bytes));
  IBDT_ASSIGN_OR_RETURN(Datatype packed, packedType(args.recvtype));
  AlltoallArgs from = args;
  if (args.inPlace) {  // rounds write R before every block left it: send from a packed copy
    from.sendbuf = plan->scratch().data() + size * args.bytes;
    from.sendtype = packed;
    from.sendcount = args.recvcount;
    from.sendStride = args.bytes;
    IBDT_ASSIGN_OR_RETURN(LocalCopy stage, makeCopy(args.recvtype, args.recvcount * size, args.recvbuf, packed,
                                                    args.recvcount * size, plan->scratch().data() + size * args.bytes,
                                                    0, size * args.bytes));
    plan->prologue().push_back(std::move(stage));
  } else {
    IBDT_ASSIGN_OR_RETURN(LocalCopy own, makeCopy(args.sendtype, args.sendcount, args.sendBlock(rank), args.recvtype,
                                                  args.recvcount, args.recvBlock(rank), 0, args.bytes));
    plan->prologue().push_back(std::move(own));
  }
  for (int k = 1; k < size; k <<= 1) IBDT_RETURN_IF_ERROR(addRound(*plan, from, packed, size, rank, k));
  return std::unique_ptr<PlanImpl>(std::move(plan));
}

}  // namespace ibdt::collectives
