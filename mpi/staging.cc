// Staging the sides ibdt cannot lay out directly (see the header).
#include "mpi/staging.h"

#include <climits>
#include <utility>

#include "collectives/alltoall_rounds.h"
#include "mpi/alltoall_call.h"
#include "mpi/type_convert.h"

namespace ibdt::mpi {
namespace {

using datatype::Datatype;

// How a side travels: its conversion, or (when ibdt cannot take its layout)
// dense elements of its signature, with the side staged.
struct SideType {
  Datatype type;
  bool staged = false;
};

// A type with no signature in ibdt (a basic type ibdt lacks, MPI_REAL16):
// one element travels as its MPI size in bytes. Every rank decides alike
// from its own type, so a side of such a type never hands the call to MPI
// while the peers wait in ibdt (the program's peers that exchange data with
// it use the same basic types, so also travel as bytes; a side with zero
// counts moves nothing whatever its type).
Result<Datatype> byteSignature(MPI_Datatype type) {
  MPI_Count size = 0;
  if (type == MPI_DATATYPE_NULL || PMPI_Type_size_x(type, &size) != MPI_SUCCESS || size < 0) {
    return makeError(Code::kInvalidArgument, "mpi: the size of a datatype without an ibdt signature");
  }
  IBDT_ASSIGN_OR_RETURN(Datatype bytes, Datatype::contiguous(size, Datatype::basic(datatype::BasicKind::kByte)));
  IBDT_RETURN_IF_ERROR(bytes.commit());
  return bytes;
}

Result<SideType> sideType(MPI_Datatype type, bool inPlace) {
  Result<Datatype> converted = convertType(type);
  if (converted.isOk() && (!inPlace || inPlaceDirect(*converted))) return SideType{*converted, false};
  Result<Datatype> signature = signatureType(type);
  if (!signature.isOk()) signature = byteSignature(type);
  if (!signature.isOk()) return signature.status();
  IBDT_ASSIGN_OR_RETURN(Datatype wire, collectives::packedType(*signature));
  return SideType{std::move(wire), true};
}

// A side's pieces: its buffer and blocks, either the program's or staged.
Status placeSide(const void* base, MPI_Datatype mpiType, bool inPlace, std::vector<int64_t> counts,
                 std::vector<int64_t> displs, Datatype& type, std::vector<int64_t>& outCounts,
                 std::vector<int64_t>& outDispls, std::unique_ptr<StagedSide>& stage) {
  IBDT_ASSIGN_OR_RETURN(SideType side, sideType(mpiType, inPlace));
  type = side.type;
  outCounts = counts;
  if (!side.staged) {
    outDispls = std::move(displs);
    return Status::ok();
  }
  IBDT_ASSIGN_OR_RETURN(stage, StagedSide::create(base, mpiType, std::move(counts), std::move(displs), side.type));
  outDispls = stage->stagedDispls();
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<StagedSide>> StagedSide::create(const void* base, MPI_Datatype type, std::vector<int64_t> counts,
                                                       std::vector<int64_t> displs, Datatype wire) {
  auto side = std::unique_ptr<StagedSide>(new StagedSide);
  MPI_Aint lb = 0;
  if (PMPI_Type_get_extent(type, &lb, &side->extent_) != MPI_SUCCESS) {
    return makeError(Code::kInvalidArgument, "mpi: the extent of a staged datatype");
  }
  side->base_ = static_cast<std::byte*>(const_cast<void*>(base));  // a send side is only read (pack)
  side->type_ = type;
  side->elementBytes_ = wire.size();
  int64_t total = 0;
  for (int64_t count : counts) {
    if (count < 0 || count * side->elementBytes_ > INT_MAX) {
      return makeError(Code::kUnsupported, "mpi: staging a block of ", count, " x ", side->elementBytes_,
                       " bytes through PMPI_Pack (int counts)");
    }
    side->stagedDispls_.push_back(total);
    total += count;
  }
  side->totalCount_ = total;
  side->counts_ = std::move(counts);
  side->displs_ = std::move(displs);
  side->buffer_.resize(static_cast<size_t>(total * side->elementBytes_));
  return side;
}

Status StagedSide::pack(MPI_Comm comm) {
  if (ibdtPacks_) {
    IBDT_ASSIGN_OR_RETURN(const datatype::Segment* segment, segmentOf(type_, totalCount_));
    return segment->pack(base_, 0, segment->size(), buffer_.data());
  }
  for (size_t j = 0; j < counts_.size(); ++j) {
    if (counts_[j] == 0) continue;
    const int bytes = static_cast<int>(counts_[j] * elementBytes_);
    int position = 0;
    if (PMPI_Pack(base_ + displs_[j] * extent_, static_cast<int>(counts_[j]), type_,
                  buffer_.data() + stagedDispls_[j] * elementBytes_, bytes, &position, comm) != MPI_SUCCESS) {
      return makeError(Code::kInvalidArgument, "mpi: PMPI_Pack of the blocks for rank ", j, " failed");
    }
  }
  return Status::ok();
}

Status StagedSide::unpack(MPI_Comm comm) {
  if (ibdtPacks_) {
    IBDT_ASSIGN_OR_RETURN(const datatype::Segment* segment, segmentOf(type_, totalCount_));
    return segment->unpack(base_, 0, segment->size(), buffer_.data());
  }
  for (size_t j = 0; j < counts_.size(); ++j) {
    if (counts_[j] == 0) continue;
    const int bytes = static_cast<int>(counts_[j] * elementBytes_);
    int position = 0;
    if (PMPI_Unpack(buffer_.data() + stagedDispls_[j] * elementBytes_, bytes, &position, base_ + displs_[j] * extent_,
                    static_cast<int>(counts_[j]), type_, comm) != MPI_SUCCESS) {
      return makeError(Code::kInvalidArgument, "mpi: PMPI_Unpack of the blocks from rank ", j, " failed");
    }
  }
  return Status::ok();
}

Status StagedAlltoallv::before(MPI_Comm comm) {
  if (sendStage) IBDT_RETURN_IF_ERROR(sendStage->pack(comm));
  if (recvStage && sendbuf == collectives::kInPlace) IBDT_RETURN_IF_ERROR(recvStage->pack(comm));
  return Status::ok();
}

Status StagedAlltoallv::after(MPI_Comm comm) { return recvStage ? recvStage->unpack(comm) : Status::ok(); }

namespace {

// Both sides, counts and displacements widened (see stageAlltoallv).
struct Sides {
  const void* sendbuf;
  MPI_Datatype sendtype;
  std::vector<int64_t> sendcounts, sdispls;
  void* recvbuf;
  MPI_Datatype recvtype;
  std::vector<int64_t> recvcounts, rdispls;
};

Result<StagedAlltoallv> stageSides(Sides sides, bool inPlaceRule) {
  // MPI_IN_PLACE ignores sendcounts, sdispls and sendtype: the outgoing
  // blocks are the incoming ones' (recvcounts, rdispls, recvtype).
  const bool inPlace = sides.sendbuf == MPI_IN_PLACE;
  StagedAlltoallv call;
  IBDT_RETURN_IF_ERROR(placeSide(sides.recvbuf, sides.recvtype, inPlace && inPlaceRule,
                                 std::move(sides.recvcounts), std::move(sides.rdispls), call.recvtype,
                                 call.recvcounts, call.rdispls, call.recvStage));
  call.recvbuf = call.recvStage ? call.recvStage->data() : sides.recvbuf;
  if (inPlace) {
    call.sendbuf = collectives::kInPlace;
    call.sendtype = call.recvtype;
    call.sendcounts = call.recvcounts;
    call.sdispls = call.rdispls;
    return call;
  }
  IBDT_RETURN_IF_ERROR(placeSide(sides.sendbuf, sides.sendtype, false, std::move(sides.sendcounts),
                                 std::move(sides.sdispls), call.sendtype, call.sendcounts, call.sdispls,
                                 call.sendStage));
  call.sendbuf = call.sendStage ? call.sendStage->data() : sides.sendbuf;
  return call;
}

}  // namespace

Result<StagedAlltoallv> stageAlltoallv(const AlltoallvArgs& args, int p, bool inPlaceRule) {
  const bool inPlace = args.sendbuf == MPI_IN_PLACE;
  return stageSides({args.sendbuf, args.sendtype, inPlace ? std::vector<int64_t>{} : widened(args.sendcounts, p),
                     inPlace ? std::vector<int64_t>{} : widened(args.sdispls, p), args.recvbuf, args.recvtype,
                     widened(args.recvcounts, p), widened(args.rdispls, p)},
                    inPlaceRule);
}

Result<std::unique_ptr<StagedSide>> stageAlltoallBlocks(const void* base, int count, MPI_Datatype type, int p,
                                                        bool converted) {
  std::vector<int64_t> counts(static_cast<size_t>(p), count), displs;
  for (int64_t j = 0; j < p; ++j) displs.push_back(j * count);
  IBDT_ASSIGN_OR_RETURN(Datatype bytes, byteSignature(type));
  IBDT_ASSIGN_OR_RETURN(std::unique_ptr<StagedSide> side,
                        StagedSide::create(base, type, std::move(counts), std::move(displs), std::move(bytes)));
  if (converted) side->packWithIbdt();
  return side;
}

Result<StagedAlltoallv> stageAlltoall(const AlltoallArgs& args, int p) {
  const bool inPlace = args.sendbuf == MPI_IN_PLACE;
  const int64_t sendcount = inPlace ? args.recvcount : args.sendcount, recvcount = args.recvcount;
  Sides sides{args.sendbuf, args.sendtype, std::vector<int64_t>(static_cast<size_t>(p), sendcount), {},
              args.recvbuf, args.recvtype, std::vector<int64_t>(static_cast<size_t>(p), recvcount), {}};
  for (int64_t j = 0; j < p; ++j) {
    sides.sdispls.push_back(j * sendcount);
    sides.rdispls.push_back(j * recvcount);
  }
  return stageSides(std::move(sides), false);
}

}  // namespace ibdt::mpi
