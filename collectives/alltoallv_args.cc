// alltoallv argument checks: everything one rank can refuse alone, before
// any message leaves (docs/alltoallv.md, "Checks").
#include "collectives/alltoallv_args.h"

#include <algorithm>
#include <string>

#include "collectives/alltoall_args.h"
#include "collectives/inplace_elements.h"
#include "base/checked_math.h"

namespace ibdt::collectives {
namespace {

constexpr const char* kOp = "alltoallv";

// One side's counts and displacements: p entries, counts >= 0.
Status checkCounts(int size, std::span<const int64_t> counts, std::span<const int64_t> displs, const char* side) {
  if (counts.size() != static_cast<size_t>(size) || displs.size() != static_cast<size_t>(size)) {
    return makeError(Code::kInvalidArgument, kOp, ": ", side, " counts (", counts.size(), ") and displacements (",
                     displs.size(), ") must have one entry per rank (", size, ")");
  }
  for (int peer = 0; peer < size; ++peer) {
    if (counts[static_cast<size_t>(peer)] < 0) {
      return makeError(Code::kInvalidArgument, kOp, ": negative ", side, " count ", counts[static_cast<size_t>(peer)],
                       " for rank ", peer);
    }
  }
  return Status::ok();
}

// A block's data bytes relative to the buffer: [first, last).
struct Span {
  int64_t first = 0, last = 0;
  int peer = 0;
};

// Every block's byte range, checked for 64-bit overflow, with the total
// packed bytes of the side.
Result<std::vector<Span>> blockSpans(std::span<const int64_t> counts, std::span<const int64_t> displs,
                                     const datatype::Datatype& type, const char* side, int64_t& totalBytes) {
  std::vector<Span> spans;
  Checked checked;
  totalBytes = 0;
  for (size_t peer = 0; peer < counts.size(); ++peer) {
    const int64_t count = counts[peer];
    const int64_t base = checked.mul(displs[peer], type.extent());
    totalBytes = checked.add(totalBytes, checked.mul(count, type.size()));
    if (count > 0 && type.size() > 0) {
      const int64_t lastElement = checked.add(base, checked.mul(count - 1, type.extent()));
      spans.push_back({checked.add(base, type.trueLb()), checked.add(lastElement, type.trueUb()),
                       static_cast<int>(peer)});
    }
    if (checked.overflow) {
      return makeError(Code::kOverflow, kOp, ": the ", side, " block of rank ", peer, " (", count,
                       " elements of extent ", type.extent(), " at displacement ", displs[peer],
                       ") or the side's total overflows 64-bit offsets");
    }
  }
  return spans;
}

// Blocks of one side that share bytes: each would overwrite (or, in place,
// be sent as) another's data.
Status checkDisjoint(std::vector<Span> spans, const char* side) {
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.first < b.first; });
  for (size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].first < spans[i - 1].last) {
      return makeError(Code::kInvalidArgument, kOp, ": the ", side, " blocks of ranks ", spans[i - 1].peer, " and ",
                       spans[i].peer, " overlap (bytes [", spans[i - 1].first, ", ", spans[i - 1].last, ") and [",
                       spans[i].first, ", ", spans[i].last, ") of the buffer)");
    }
  }
  return Status::ok();
}

Result<std::vector<datatype::Signature>> signatures(std::span<const int64_t> counts, const datatype::Datatype& type) {
  std::vector<datatype::Signature> result;
  for (int64_t count : counts) {
    IBDT_ASSIGN_OR_RETURN(datatype::Signature signature, datatype::signature(type, count));
    result.push_back(signature);
  }
  return result;
}

Status checkBuffers(const AlltoallvArgs& args, int64_t sendBytes, int64_t recvBytes) {
  if (args.inPlace) {
    if (recvBytes + sendBytes > 0 && args.recvbuf == nullptr) {
      return makeError(Code::kInvalidArgument, kOp, ": in place, recvbuf is null but ", sendBytes, " bytes leave and ",
                       recvBytes, " arrive");
    }
    return Status::ok();
  }
  if (sendBytes > 0 && args.sendbuf == nullptr) {
    return makeError(Code::kInvalidArgument, kOp, ": sendbuf is null but ", sendBytes, " bytes leave");
  }
  if (recvBytes > 0 && args.recvbuf == nullptr) {
    return makeError(Code::kInvalidArgument, kOp, ": recvbuf is null but ", recvBytes, " bytes arrive");
  }
  if (sendBytes + recvBytes > 0 && static_cast<const void*>(args.sendbuf) == args.recvbuf) {
    return makeError(Code::kInvalidArgument, kOp, ": sendbuf == recvbuf; pass collectives::kInPlace as sendbuf ",
                     "for an in-place exchange");
  }
  return Status::ok();
}

}  // namespace

PairwiseLayout AlltoallvArgs::layout() const {
  PairwiseLayout result{sendtype, recvtype, {}};
  for (size_t peer = 0; peer < sendcounts.size(); ++peer) {
    result.peers.push_back(
        {sendBlock(static_cast<int>(peer)), sendcounts[peer], recvBlock(static_cast<int>(peer)), recvcounts[peer]});
  }
  return result;
}

Result<AlltoallvArgs> checkAlltoallvArgs(const Communicator& comm, const void* sendbuf,
                                         std::span<const int64_t> sendcounts, std::span<const int64_t> sdispls,
                                         const datatype::Datatype& sendtype, void* recvbuf,
                                         std::span<const int64_t> recvcounts, std::span<const int64_t> rdispls,
                                         const datatype::Datatype& recvtype) {
  AlltoallvArgs args;
  args.inPlace = sendbuf == kInPlace;
  if (!args.inPlace) IBDT_RETURN_IF_ERROR(checkCommittedType(kOp, sendtype, "sendtype"));
  IBDT_RETURN_IF_ERROR(checkCommittedType(kOp, recvtype, "recvtype"));
  // In place, blocks are moved element by element: elements must share no byte.
  if (sendbuf == kInPlace) IBDT_RETURN_IF_ERROR(checkInPlaceLayout(recvtype));
  IBDT_RETURN_IF_ERROR(checkCounts(comm.size(), sendcounts, sdispls, "send"));
  IBDT_RETURN_IF_ERROR(checkCounts(comm.size(), recvcounts, rdispls, "receive"));
  args.recvbuf = static_cast<std::byte*>(recvbuf);
  args.sendbuf = args.inPlace ? args.recvbuf : static_cast<const std::byte*>(sendbuf);
  args.recvtype = recvtype;
  args.sendtype = args.inPlace ? recvtype : sendtype;
  args.sendcounts.assign(sendcounts.begin(), sendcounts.end());
  args.sdispls.assign(sdispls.begin(), sdispls.end());
  args.recvcounts.assign(recvcounts.begin(), recvcounts.end());
  args.rdispls.assign(rdispls.begin(), rdispls.end());
  int64_t sendBytes = 0, recvBytes = 0;
  IBDT_ASSIGN_OR_RETURN(std::vector<Span> sendSpans, blockSpans(sendcounts, sdispls, args.sendtype, "send", sendBytes));
  IBDT_ASSIGN_OR_RETURN(std::vector<Span> recvSpans, blockSpans(recvcounts, rdispls, recvtype, "receive", recvBytes));
  IBDT_RETURN_IF_ERROR(checkDisjoint(std::move(recvSpans), "receive"));
  if (args.inPlace) IBDT_RETURN_IF_ERROR(checkDisjoint(std::move(sendSpans), "send"));
  IBDT_RETURN_IF_ERROR(checkBuffers(args, sendBytes, recvBytes));
  IBDT_ASSIGN_OR_RETURN(args.sendSignatures, signatures(sendcounts, args.sendtype));
  IBDT_ASSIGN_OR_RETURN(args.recvSignatures, signatures(recvcounts, recvtype));
  const size_t me = static_cast<size_t>(comm.rank());
  if (args.sendSignatures[me] != args.recvSignatures[me]) {
    return makeError(Code::kInvalidArgument, kOp, ": rank ", comm.rank(), "'s block to itself: the send signature (",
                     sendcounts[me], " elements, ", args.sendSignatures[me].elements,
                     " basic elements) differs from the receive signature (", recvcounts[me], " elements, ",
                     args.recvSignatures[me].elements, " basic elements)");
  }
  return args;
}

}  // namespace ibdt::collectives
