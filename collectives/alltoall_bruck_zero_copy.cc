// Zero-copy Bruck alltoall (Träff, Rougier, Hunold 2014, Listing 3): the
// modified Bruck schedule (alltoall_bruck_modified.cc, radix 2) with no
// staging copy. In round k, block j (bit k of j set) is
//   * received into the receive buffer at rank + j when the number of set
//     bits of j at k and above is odd (the last hop lands it in place), else
//     into a slot of the intermediate buffer (packed, in the receive type's
//     signature; slots are reused once their block moved on, see Slots);
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

// Where block j goes in round k (bit k of j set): into the receive buffer
// when the set bits of j at k and above are odd in number (its last hop is
// one of them), else into the intermediate buffer; it leaves from the send
// buffer when no bit below k is set.
bool intoRecvbuf(int j, int k) { return std::popcount(static_cast<unsigned>(j) & ~(static_cast<unsigned>(k) - 1)) % 2 == 1; }
bool fresh(int j, int k) { return (j & (k - 1)) == 0; }

// Intermediate-buffer slots, reused: a block holds its slot from the round
// that receives it there to the round that sends it on (inclusive), and a
// slot freed by a round's send is taken again from the next round on. The
// slots needed are the peak occupancy (~3p/4), not p: slotOf[round][j].
struct Slots {
  int64_t count = 0;
  std::vector<std::vector<int64_t>> slotOf;
};

Slots assignSlots(int size) {
  Slots slots;
  std::vector<int64_t> held(static_cast<size_t>(size), -1), free, freedNext;
  for (int k = 1; k < size; k <<= 1) {
    free.insert(free.end(), freedNext.begin(), freedNext.end());
    freedNext.clear();
    std::vector<int64_t>& round = slots.slotOf.emplace_back(static_cast<size_t>(size), -1);
    for (int j : bruckBlocks(size, 2, k, 1)) {
      int64_t& slot = held[static_cast<size_t>(j)];
      if (!intoRecvbuf(j, k)) {  // received into a slot
        if (free.empty()) {
          slot = slots.count++;
        } else {
          slot = free.back();
          free.pop_back();
        }
      } else if (!fresh(j, k)) {  // sent on from its slot, free after this round
        freedNext.push_back(slot);
      }
      round[static_cast<size_t>(j)] = slot;
    }
  }
  return slots;
}

Status addRound(RoundsPlan& plan, const AlltoallArgs& args, const Datatype& packed, const std::vector<int64_t>& slotOf,
                int size, int rank, int k) {
  std::byte* base = args.recvbuf;
  std::byte* inter = plan.scratch().data();
  Pieces send, recv;
  for (int j : bruckBlocks(size, 2, k, 1)) {
    const int dest = (rank - j + size) % size, source = (rank + j) % size;
    // -1: the block goes to the receive buffer and holds no slot (then
    // `inter` may be empty: no offset is ever applied to it).
    const int64_t slotIndex = slotOf[static_cast<size_t>(j)];
    std::byte* slot = slotIndex < 0 ? nullptr : inter + slotIndex * args.bytes;
    if (intoRecvbuf(j, k)) {
      recv.add(args.recvcount, args.recvBlock(source), base, args.recvtype);
    } else {
      recv.add(args.recvcount, slot, base, packed);
    }
    if (fresh(j, k)) {
      send.add(args.sendcount, args.sendBlock(dest), base, args.sendtype);
    } else if (intoRecvbuf(j, k)) {
      send.add(args.recvcount, slot, base, packed);
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
  // The reused slots, and in place p more for the send blocks.
  const Slots slots = assignSlots(size);
  const int64_t staged = args.inPlace ? size : 0;
  plan->scratch().resize(static_cast<size_t>((slots.count + staged) * args.bytes));
  IBDT_ASSIGN_OR_RETURN(Datatype packed, packedType(args.recvtype));
  AlltoallArgs from = args;
  if (args.inPlace) {  // rounds write R before every block left it: send from a packed copy
    from.sendbuf = plan->scratch().data() + slots.count * args.bytes;
    from.sendtype = packed;
    from.sendcount = args.recvcount;
    from.sendStride = args.bytes;
    IBDT_ASSIGN_OR_RETURN(LocalCopy stage, makeCopy(args.recvtype, args.recvcount * size, args.recvbuf, packed,
                                                    args.recvcount * size, plan->scratch().data() + slots.count * args.bytes,
                                                    0, size * args.bytes));
    plan->prologue().push_back(std::move(stage));
  } else {
    IBDT_ASSIGN_OR_RETURN(LocalCopy own, makeCopy(args.sendtype, args.sendcount, args.sendBlock(rank), args.recvtype,
                                                  args.recvcount, args.recvBlock(rank), 0, args.bytes));
    plan->prologue().push_back(std::move(own));
  }
  size_t round = 0;
  for (int k = 1; k < size; k <<= 1) {
    IBDT_RETURN_IF_ERROR(addRound(*plan, from, packed, slots.slotOf[round++], size, rank, k));
  }
  return std::unique_ptr<PlanImpl>(std::move(plan));
}

}  // namespace ibdt::collectives
