// Zero-copy Bruck alltoallv (Träff, Rougier, Hunold 2014, §4.3, on the
// zero-copy schedule of alltoall_bruck_zero_copy.cc): ⌈log2 p⌉ rounds, each
// a single message of a struct type over the send, receive and intermediate
// buffers, for problems whose blocks are not too irregular (every block is
// forwarded up to log2 p times, so one huge block costs log2 p copies of it).
//
// Blocks differ in size, and a rank forwards blocks whose size only their
// source and destination know. The paper exchanges the counts in every
// round before the data; a persistent plan does that once: at init the
// counts travel the same rounds as the data will (a Bruck exchange of one
// int64 per block), so every rank learns the size of each block it
// forwards, checks each block's size at its destination (a mismatch fails
// every rank at init, consistently), places the blocks in transit
// (bruck_zero_copy_placement.cc: in a receive block whose own block arrives
// later and that is large enough, else an intermediate slot sized for the
// largest block it forwards) and builds every round's types. A started run
// then costs what a zero-copy Bruck alltoall costs: ⌈log2 p⌉ messages.
//
// Blocks in transit are held packed, so every rank's send and receive types
// must consist of one basic kind, the same on all ranks (checked at init by
// an allreduce, kInvalidArgument on every rank otherwise). Init is
// collective (two allreduces and the count exchange), a rank whose
// arguments were refused included. Not in place (alltoallvInit runs the
// limited-memory algorithm then).
#include <algorithm>
#include <cstdint>
#include <optional>

#include "collectives/alltoall_bruck.h"
#include "collectives/alltoallv_algorithms.h"
#include "collectives/bruck_rounds.h"
#include "collectives/bruck_zero_copy_placement.h"

namespace ibdt::collectives {

using datatype::BasicKind;
using datatype::Datatype;

std::optional<BasicKind> uniformKind(const Datatype& type) {
  auto whole = datatype::signature(type, 1);
  if (!whole.isOk()) return std::nullopt;
  for (int k = 1; k <= datatype::kBasicKindCount; ++k) {
    const auto kind = static_cast<BasicKind>(k);
    const int64_t size = datatype::basicSize(kind);
    if (type.size() % size != 0) continue;
    auto same = datatype::signature(Datatype::basic(kind), type.size() / size);
    if (same.isOk() && *same == *whole) return kind;
  }
  return std::nullopt;
}

namespace {

// The round whose receive brought block j to this rank before round k (its
// highest set bit below k), or -1 when it still sits in the send buffer.
int heldSince(int j, int k) {
  for (int below = k - 1; below >= 0; --below) {
    if ((j >> below) & 1) return below;
  }
  return -1;
}

// Element counts of the blocks at this rank: at(-1, j) what block j holds
// at the start (this rank's own block for rank - j), at(k, j) what the
// receive of round k brings.
class HopCounts {
 public:
  explicit HopCounts(int size) : size_(size), counts_(static_cast<size_t>((bruckRounds(size) + 1) * size), 0) {}
  int64_t& at(int round, int j) { return counts_[static_cast<size_t>((round + 1) * size_ + j)]; }
  int64_t at(int round, int j) const { return counts_[static_cast<size_t>((round + 1) * size_ + j)]; }
  // What block j weighs when round k sends it.
  int64_t sent(int round, int j) const { return at(heldSince(j, round), j); }
  // What block j weighs at its destination (its last hop).
  int64_t delivered(int j) const { return at(heldSince(j, bruckRounds(size_)), j); }
  int64_t* data() { return counts_.data(); }

 private:
  int size_;
  std::vector<int64_t> counts_;
};

// Adds to `plan` the rounds of a Bruck exchange of one int64 per block.
Status addCountRounds(RoundsPlan& plan, int size, int rank, HopCounts& counts) {
  const Datatype word = Datatype::of<int64_t>();
  const void* base = counts.data();
  for (int k = 0; (1 << k) < size; ++k) {
    StructPieces send, recv;
    for (int j : bruckBlocks(size, 2, int64_t{1} << k, 1)) {
      send.add(1, &counts.at(heldSince(j, k), j), base, word);
      recv.add(1, &counts.at(k, j), base, word);
    }
    IBDT_ASSIGN_OR_RETURN(Datatype sendType, send.build());
    IBDT_ASSIGN_OR_RETURN(Datatype recvType, recv.build());
    IBDT_RETURN_IF_ERROR(plan.addExchange(plan.addRound(), (rank - (1 << k) + size) % size, base, 1, sendType,
                                          (rank + (1 << k)) % size, const_cast<void*>(base), 1, recvType));
  }
  return Status::ok();
}

// Every rank's types are of one basic kind, the same everywhere; a rank
// whose arguments failed (null `args`) takes part and fails them all.
Result<BasicKind> agreeOnKind(Communicator& comm, const AlltoallvArgs* args) {
  constexpr int64_t kRefused = -2;
  int64_t mine = kRefused;
  if (args != nullptr) {
    const auto send = uniformKind(args->sendtype), recv = uniformKind(args->recvtype);
    mine = send && recv && *send == *recv ? static_cast<int64_t>(*send) : -1;
  }
  int64_t extremes[2] = {mine, -mine};  // one allreduce gives the largest and the smallest
  IBDT_RETURN_IF_ERROR(allreduce(comm, extremes, extremes, 2, ReduceOp::kMax));
  const int64_t high = extremes[0], low = -extremes[1];
  if (low == kRefused) {
    return makeError(Code::kInvalidArgument, "alltoallv bruck-zero-copy: another rank's arguments were refused");
  }
  if (low < 0 || low != high) {
    return makeError(Code::kInvalidArgument, "alltoallv bruck-zero-copy: every rank's send and receive types must "
                     "consist of one basic kind, the same on all ranks (rank ", comm.rank(), ": ",
                     mine < 0 ? "mixed kinds" : datatype::basicName(static_cast<BasicKind>(mine)), ")");
  }
  return static_cast<BasicKind>(low);
}

// The element counts of every hop this rank takes part in. Checks each
// block's size at its destination; a mismatch anywhere fails every rank.
Result<HopCounts> exchangeCounts(Communicator& comm, const AlltoallvArgs& args) {
  const int size = comm.size(), rank = comm.rank();
  HopCounts counts(size);
  for (int j = 1; j < size; ++j) counts.at(-1, j) = args.sendSignatures[static_cast<size_t>((rank - j + size) % size)].elements;
  auto rounds = std::make_unique<RoundsPlan>(comm, "bruck-v-counts");
  IBDT_RETURN_IF_ERROR(addCountRounds(*rounds, size, rank, counts));
  Plan plan(std::move(rounds));
  IBDT_RETURN_IF_ERROR(plan.start());
  IBDT_RETURN_IF_ERROR(plan.wait(Deadline::never()));
  int64_t wrong = -1;  // the first source whose block does not match its receive
  for (int j = 1; j < size && wrong < 0; ++j) {
    const int source = (rank + j) % size;
    if (counts.delivered(j) != args.recvSignatures[static_cast<size_t>(source)].elements) wrong = j;
  }
  int64_t anyWrong = wrong;
  IBDT_RETURN_IF_ERROR(allreduce(comm, &anyWrong, &anyWrong, 1, ReduceOp::kMax));
  if (wrong >= 0) {
    const int source = static_cast<int>((rank + wrong) % size);
    return makeError(Code::kInvalidArgument, "alltoallv bruck-zero-copy: rank ", rank, " receives ",
                     args.recvSignatures[static_cast<size_t>(source)].elements, " elements from rank ", source,
                     ", which sends ", counts.delivered(static_cast<int>(wrong)));
  }
  if (anyWrong >= 0) {
    return makeError(Code::kInvalidArgument, "alltoallv bruck-zero-copy: another rank's counts do not match "
                     "what its peer sends (that rank names the pair)");
  }
  return counts;
}

}  // namespace

Result<std::unique_ptr<PlanImpl>> makeZeroCopyBruckAlltoallv(Communicator& comm, Result<AlltoallvArgs> checked) {
  Result<BasicKind> agreed = agreeOnKind(comm, checked.isOk() ? &*checked : nullptr);
  IBDT_RETURN_IF_ERROR(checked.status());
  IBDT_ASSIGN_OR_RETURN(const BasicKind kind, std::move(agreed));
  return buildZeroCopyBruckAlltoallv(comm, *checked, kind);
}

Result<std::unique_ptr<PlanImpl>> buildZeroCopyBruckAlltoallv(Communicator& comm, const AlltoallvArgs& args,
                                                              BasicKind kind) {
  const int size = comm.size(), rank = comm.rank();
  IBDT_ASSIGN_OR_RETURN(const HopCounts elements, exchangeCounts(comm, args));
  const Datatype element = Datatype::basic(kind);
  const int64_t elementBytes = datatype::basicSize(kind);
  const int64_t perRecvElement = args.recvtype.size() / elementBytes;

  // A block may wait in a receive block when that one is dense and larger.
  const bool denseReceive = args.recvtype.contiguous();
  auto capacity = [&](int64_t receiveBlock) {
    return args.recvcounts[static_cast<size_t>((rank + receiveBlock) % size)] * perRecvElement;
  };
  const int rounds = bruckRounds(size);
  const BruckPlacement placement = placeZeroCopyBruck(size, [&](int j, int arrive, int64_t receiveBlock) {
    return denseReceive && elements.at(arrive, j) <= capacity(receiveBlock);
  });
  int64_t slotElements = 0;  // the largest block this rank forwards
  for (int k = 0; k < rounds; ++k) {
    for (int j : bruckBlocks(size, 2, int64_t{1} << k, 1)) {
      if (heldSince(j, rounds) != k) slotElements = std::max(slotElements, elements.at(k, j));
    }
  }
  auto plan = std::make_unique<RoundsPlan>(comm, "bruck-zero-copy");
  plan->scratch().resize(static_cast<size_t>(placement.intermediateSlots * slotElements * elementBytes));
  const std::byte* intermediate = plan->scratch().data();
  const void* base = args.recvbuf;

  // Where block j is, as a piece of a round's send or receive type; `last`:
  // its final hop, into its own receive block (an earlier hop may wait there
  // too, packed).
  auto addPiece = [&](StructPieces& pieces, const BruckPlace& place, int j, int64_t count, bool last) {
    switch (place.buffer) {
      case BruckPlace::Buffer::kSend: {
        const int peer = (rank - j + size) % size;
        pieces.add(args.sendcounts[static_cast<size_t>(peer)], args.sendBlock(peer), base, args.sendtype);
        return;
      }
      case BruckPlace::Buffer::kReceive: {
        const int source = static_cast<int>((rank + place.index) % size);
        if (last) {  // its own block: the receive type
          pieces.add(args.recvcounts[static_cast<size_t>(source)], args.recvBlock(source), base, args.recvtype);
        } else {  // parked, packed, in a dense receive block
          pieces.add(count, args.recvBlock(source) + args.recvtype.trueLb(), base, element);
        }
        return;
      }
      case BruckPlace::Buffer::kIntermediate:
        pieces.add(count, intermediate + place.index * slotElements * elementBytes, base, element);
        return;
    }
  };
  for (int k = 0; k < rounds; ++k) {
    StructPieces send, recv;
    for (int j : bruckBlocks(size, 2, int64_t{1} << k, 1)) {
      const auto r = static_cast<size_t>(k), b = static_cast<size_t>(j);
      addPiece(send, placement.sendFrom[r][b], j, elements.sent(k, j), false);
      addPiece(recv, placement.receiveInto[r][b], j, elements.at(k, j), heldSince(j, rounds) == k);
    }
    const int to = (rank - (1 << k) + size) % size, from = (rank + (1 << k)) % size;
    auto& round = plan->addRound();
    if (send.empty() && recv.empty()) {
      IBDT_RETURN_IF_ERROR(plan->addEmptyExchange(round, to, from));
      continue;
    }
    // An empty side is zero elements (its peer expects nothing either).
    IBDT_ASSIGN_OR_RETURN(Datatype sendType, send.empty() ? Result<Datatype>(element) : send.build());
    IBDT_ASSIGN_OR_RETURN(Datatype recvType, recv.empty() ? Result<Datatype>(element) : recv.build());
    IBDT_RETURN_IF_ERROR(plan->addExchange(round, to, base, send.empty() ? 0 : 1, sendType, from,
                                           const_cast<void*>(base), recv.empty() ? 0 : 1, recvType));
  }
  const int64_t ownBytes = args.sendcounts[static_cast<size_t>(rank)] * args.sendtype.size();
  IBDT_ASSIGN_OR_RETURN(LocalCopy own,
                        makeCopy(args.sendtype, args.sendcounts[static_cast<size_t>(rank)], args.sendBlock(rank),
                                 args.recvtype, args.recvcounts[static_cast<size_t>(rank)], args.recvBlock(rank), 0,
                                 ownBytes));
  plan->prologue().push_back(std::move(own));
  return std::unique_ptr<PlanImpl>(std::move(plan));
}

}  // namespace ibdt::collectives
