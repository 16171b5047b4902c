// collectives/alltoall_args.h — MPI_Alltoall's arguments, checked once at
// init and resolved to per-peer block strides, shared by every alltoall
// algorithm.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ibdt/collectives.h"
#include "ibdt/datatype.h"

namespace ibdt::collectives {

struct AlltoallArgs {
  const std::byte* sendbuf = nullptr;
  int64_t sendcount = 0;
  datatype::Datatype sendtype;
  int64_t sendStride = 0;  // bytes from one peer's send block to the next
  std::byte* recvbuf = nullptr;
  int64_t recvcount = 0;
  datatype::Datatype recvtype;
  int64_t recvStride = 0;
  int64_t bytes = 0;  // packed bytes each pair exchanges
  bool inPlace = false;  // kInPlace: the send side is the receive side

  const std::byte* sendBlock(int peer) const { return sendbuf + peer * sendStride; }
  std::byte* recvBlock(int peer) const { return recvbuf + peer * recvStride; }
};

// A valid, committed, not freed type; errors start with `op`.
Status checkCommittedType(const char* op, const datatype::Datatype& type, const char* which);

// Checks types (valid, committed), counts, that this rank's send and receive
// signatures are equal, buffers present when bytes move, and that no block
// offset overflows; every error names the argument and why. With
// sendbuf == kInPlace the send side is the receive side (inPlace).
Result<AlltoallArgs> checkAlltoallArgs(const Communicator& comm, const void* sendbuf, int64_t sendcount,
                                       const datatype::Datatype& sendtype, void* recvbuf, int64_t recvcount,
                                       const datatype::Datatype& recvtype);

}  // namespace ibdt::collectives
