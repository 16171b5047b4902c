// mpi/staging.h — an alltoall(v) whose types ibdt cannot lay out directly
// on this rank, run anyway: the side it cannot take goes through a buffer
// packed by PMPI_Pack before the run (received blocks: unpacked by
// PMPI_Unpack after it), described as dense elements of the type's own
// signature (signatureType, collectives::packedType).
//
// Why: a call without a collective agreement (MPI_Ialltoall(v), the
// persistent MPI_Alltoall_init) must be taken by every rank or by none, and
// only the types' signatures are the same everywhere in a correct program,
// not their layouts. A rank whose type has a negative extent (no ibdt
// layout) or, in place for the alltoallv, has elements that interleave or
// share bytes (mpi/alltoallv_call.h, inPlaceDirect) still runs ibdt's plan with messages
// of the same signatures as its peers', instead of handing its call to MPI
// while they wait in ibdt's exchange.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ibdt/datatype.h"
#include "ibdt/status.h"
#include "mpi/alltoall_call.h"
#include "mpi/alltoallv_call.h"

namespace ibdt::mpi {

// One side's p blocks staged in a dense buffer (see above).
class StagedSide {
 public:
  // `base`, `type`, `counts` and `displs` (elements of `type`): the side's
  // blocks as MPI_Alltoallv describes them; `wire`: one element's signature, dense.
  static Result<std::unique_ptr<StagedSide>> create(const void* base, MPI_Datatype type, std::vector<int64_t> counts,
                                                    std::vector<int64_t> displs, datatype::Datatype wire);
  std::byte* data() { return buffer_.data(); }
  const std::vector<int64_t>& stagedDispls() const { return stagedDispls_; }
  Status pack(MPI_Comm comm);    // the program's blocks into the buffer
  Status unpack(MPI_Comm comm);  // the buffer into the program's blocks
  // The blocks lie back to back in elements of a type ibdt converted (a
  // non-dense side of a per-size plan, mpi/direct_write_call.h): packed and
  // unpacked whole by ibdt's datatype engine, byte for byte what PMPI_Pack
  // gives and faster (Open MPI packs 8-byte pieces at 2-5 GB/s).
  void packWithIbdt() { ibdtPacks_ = true; }

 private:
  std::byte* base_ = nullptr;
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
  MPI_Aint extent_ = 0;
  int64_t elementBytes_ = 0;
  std::vector<int64_t> counts_, displs_, stagedDispls_;
  std::vector<std::byte> buffer_;
  bool ibdtPacks_ = false;
  int64_t totalCount_ = 0;  // elements over all blocks
};

// What ibdt runs for one alltoall(v) on this rank: the program's buffers and
// converted types where ibdt can lay them out, staging buffers elsewhere.
// In place, the one buffer is staged whole (packed before, unpacked after).
struct StagedAlltoallv {
  const void* sendbuf = nullptr;  // collectives::kInPlace in place
  std::vector<int64_t> sendcounts, sdispls;
  datatype::Datatype sendtype;
  void* recvbuf = nullptr;
  std::vector<int64_t> recvcounts, rdispls;
  datatype::Datatype recvtype;
  std::unique_ptr<StagedSide> sendStage, recvStage;

  bool staged() const { return sendStage || recvStage; }
  Status before(MPI_Comm comm);  // packs the staged sides
  Status after(MPI_Comm comm);   // unpacks the staged receive side
};

// The arguments of one alltoallv for ibdt on `p` ranks. `inPlaceRule`: in
// place, a type that inPlaceDirect() refuses is staged too (ibdt's
// in-place alltoallv). Fails only for a type without a signature in ibdt (no basic
// type of its kind and size), or staging beyond MPI's int counts.
Result<StagedAlltoallv> stageAlltoallv(const AlltoallvArgs& args, int p, bool inPlaceRule);

// The same for an alltoall: block j of `count` elements at element j * count.
Result<StagedAlltoallv> stageAlltoall(const AlltoallArgs& args, int p);

// One side of an alltoall (p blocks of `count` x `type`, block j at element
// j * count) staged as packed bytes whatever its type (mpi/direct_write_call.h);
// `converted`: ibdt has the type's layout (packed by ibdt, not PMPI_Pack).
Result<std::unique_ptr<StagedSide>> stageAlltoallBlocks(const void* base, int count, MPI_Datatype type, int p,
                                                        bool converted);

}  // namespace ibdt::mpi
