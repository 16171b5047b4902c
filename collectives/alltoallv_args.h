// collectives/alltoallv_args.h — MPI_Alltoallv's arguments, checked once at
// init (before anything is sent) and resolved to per-peer blocks and
// signatures, shared by the alltoallv algorithms.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "collectives/pairwise_rounds.h"
#include "ibdt/collectives.h"
#include "ibdt/datatype.h"

namespace ibdt::collectives {

struct AlltoallvArgs {
  bool inPlace = false;  // sendbuf was kInPlace: sendbuf == recvbuf, sendtype == recvtype
  const std::byte* sendbuf = nullptr;
  std::byte* recvbuf = nullptr;
  datatype::Datatype sendtype, recvtype;
  std::vector<int64_t> sendcounts, sdispls, recvcounts, rdispls;  // by communicator rank
  std::vector<datatype::Signature> sendSignatures, recvSignatures;

  const std::byte* sendBlock(int peer) const {
    return sendbuf + sdispls[static_cast<size_t>(peer)] * sendtype.extent();
  }
  std::byte* recvBlock(int peer) const { return recvbuf + rdispls[static_cast<size_t>(peer)] * recvtype.extent(); }
  // Every peer's blocks, for the pairwise round driver.
  PairwiseLayout layout() const;
};

// Checks everything a rank can check alone (see collectives.h, alltoallv);
// every error names the argument, the peer and why.
Result<AlltoallvArgs> checkAlltoallvArgs(const Communicator& comm, const void* sendbuf,
                                         std::span<const int64_t> sendcounts, std::span<const int64_t> sdispls,
                                         const datatype::Datatype& sendtype, void* recvbuf,
                                         std::span<const int64_t> recvcounts, std::span<const int64_t> rdispls,
                                         const datatype::Datatype& recvtype);

}  // namespace ibdt::collectives
