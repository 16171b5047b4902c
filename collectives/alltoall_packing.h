// collectives/alltoall_packing.h — how one rank packs its alltoall blocks
// into a shared row and unpacks the blocks it receives: each rank's own
// choice (no peer sees its types), used by the plans that exchange through
// a node's shared memory (alltoall_shared_memory.h, ialltoall_mailbox.h).
#pragma once

#include <cstddef>
#include <optional>

#include "collectives/alltoall_args.h"
#include "ibdt/datatype.h"

namespace ibdt::collectives {

struct AlltoallPacking {
  datatype::Segment send;  // p * sendcount x sendtype (in place: the receive side)
  datatype::Segment recv;  // p * recvcount x recvtype
  // Our own block, send to receive buffer directly (not through the row:
  // two copies less); none in place, where it already lies where it belongs.
  std::optional<datatype::TypedCopy> own;
  bool sendDense = false, recvDense = false;  // blocks back to back, each one dense run: memcpy

  static Result<AlltoallPacking> of(const AlltoallArgs& args, int p);

  // Packs this rank's blocks for every peer but itself into `row` (block i
  // at i * args.bytes).
  Status packRow(const AlltoallArgs& args, int p, int rank, std::byte* row) const;
  // Copies our own block across (not in place).
  Status copyOwn(const AlltoallArgs& args, int rank) const;
  // Unpacks `block`, what `source` sent us, into our receive block `source`.
  Status unpackBlock(const AlltoallArgs& args, int source, const std::byte* block) const;
};

// Whether `args` describe the same layouts as `current` (same counts, type
// ids and versions): a plan then keeps its packing and only moves buffers.
bool sameAlltoallLayouts(const AlltoallArgs& args, const AlltoallArgs& current);

}  // namespace ibdt::collectives
