// Where zero-copy Bruck keeps each block between its hops, so that the
// intermediate buffer needs fewer than ⌊p/2⌋ blocks (the open problem of
// Träff/Rougier/Hunold 2014, §6; docs/alltoall-bruck.md, "Intermediate
// buffer"). A block in transit may wait in any receive-buffer block whose
// own final block has not arrived yet, not only in its own one.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace ibdt::collectives {

// One place a block is received into or sent from.
struct BruckPlace {
  enum class Buffer : uint8_t { kSend, kReceive, kIntermediate };
  Buffer buffer = Buffer::kSend;
  // kReceive: the relative receive block (rank + index) % p; kIntermediate:
  // the slot; kSend: unused (the block rank - j of the send buffer).
  int64_t index = 0;
};

struct BruckPlacement {
  int64_t intermediateSlots = 0;
  // [round][j], for the blocks j that move in the round (bit `round` of j
  // set); the other entries are unused.
  std::vector<std::vector<BruckPlace>> receiveInto, sendFrom;
};

// The same on every rank (it depends only on p). Never receives into a
// block that is sent from in the same round or that still holds a block,
// and every block's last hop lands in its own receive block.
BruckPlacement placeZeroCopyBruck(int size);
// Blocks of different sizes (zero-copy Bruck alltoallv): block j, as round
// `arrive` brought it, waits in receive block `receiveBlock` only when
// fits(j, arrive, receiveBlock); intermediate slots hold any block (the
// caller sizes them for the largest).
using BlockFits = std::function<bool(int block, int arrive, int64_t receiveBlock)>;
BruckPlacement placeZeroCopyBruck(int size, const BlockFits& fits);

}  // namespace ibdt::collectives
