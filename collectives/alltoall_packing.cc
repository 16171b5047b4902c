// How a rank packs its blocks into a shared row and unpacks what it
// receives (see the header).
#include "collectives/alltoall_packing.h"

#include <cstring>
#include <utility>

#include "collectives/alltoall_direct_write.h"

namespace ibdt::collectives {

Result<AlltoallPacking> AlltoallPacking::of(const AlltoallArgs& args, int p) {
  const datatype::Datatype& sendtype = args.inPlace ? args.recvtype : args.sendtype;
  const int64_t sendcount = args.inPlace ? args.recvcount : args.sendcount;
  IBDT_ASSIGN_OR_RETURN(datatype::Segment send, datatype::Segment::create(sendtype, p * sendcount));
  IBDT_ASSIGN_OR_RETURN(datatype::Segment recv, datatype::Segment::create(args.recvtype, p * args.recvcount));
  std::optional<datatype::TypedCopy> own;
  if (!args.inPlace) {
    IBDT_ASSIGN_OR_RETURN(datatype::TypedCopy copy, datatype::TypedCopy::create(args.sendtype, args.sendcount,
                                                                                 args.recvtype, args.recvcount));
    own.emplace(std::move(copy));
  }
  return AlltoallPacking{std::move(send), std::move(recv), std::move(own), denseBlocks(sendtype),
                         denseBlocks(args.recvtype)};
}

Status AlltoallPacking::packRow(const AlltoallArgs& args, int p, int rank, std::byte* row) const {
  const std::byte* from = args.inPlace ? args.recvbuf : args.sendbuf;
  // The blocks for the peers: before ours and after it.
  const int64_t b = args.bytes, ownAt = rank * b, total = p * b;
  for (auto [first, last] : {std::pair{int64_t{0}, ownAt}, std::pair{ownAt + b, total}}) {
    if (first == last) continue;
    if (sendDense) {
      std::memcpy(row + first, from + first, static_cast<size_t>(last - first));
    } else {
      IBDT_RETURN_IF_ERROR(send.pack(from, first, last, row + first));
    }
  }
  return Status::ok();
}

Status AlltoallPacking::copyOwn(const AlltoallArgs& args, int rank) const {
  if (!own.has_value() || own->size() == 0) return Status::ok();
  return own->run(args.sendBlock(rank), args.recvBlock(rank), 0, own->size());
}

Status AlltoallPacking::unpackBlock(const AlltoallArgs& args, int source, const std::byte* block) const {
  if (args.bytes == 0) return Status::ok();
  if (recvDense) {
    std::memcpy(args.recvBlock(source), block, static_cast<size_t>(args.bytes));
    return Status::ok();
  }
  return recv.unpack(args.recvbuf, source * args.bytes, (source + 1) * args.bytes, block);
}

bool sameAlltoallLayouts(const AlltoallArgs& args, const AlltoallArgs& current) {
  auto same = [](const datatype::Datatype& a, int64_t aCount, const datatype::Datatype& b, int64_t bCount) {
    return aCount == bCount && a.id() == b.id() && a.version() == b.version();
  };
  return args.inPlace == current.inPlace && same(args.sendtype, args.sendcount, current.sendtype, current.sendcount) &&
         same(args.recvtype, args.recvcount, current.recvtype, current.recvcount);
}

}  // namespace ibdt::collectives
