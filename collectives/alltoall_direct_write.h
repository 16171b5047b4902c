// collectives/alltoall_direct_write.h — alltoall by one-sided writes
// straight into the peers' receive buffers (docs/alltoall-direct-writes.md).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "collectives/alltoall_args.h"
#include "collectives/plan_impl.h"

namespace ibdt::collectives {

// Collective: every rank calls it together (the ranks agree whether the
// arguments allow direct writes and exchange their receive buffers' keys).
// `checked` failed on some rank: every rank fails. Both types dense (one
// run of bytes per block) on every rank: direct writes; else every rank
// falls back to pairwise rounds (`throttle`). kInPlace: kInvalidArgument
// (a peer's write would land on a block not yet sent).
// One pair's dense blocks (bytes).
struct DirectBlock {
  const std::byte* send = nullptr;
  int64_t sendBytes = 0;
  std::byte* recv = nullptr;
  int64_t recvBytes = 0;
};

// One dense run of count x type bytes starting at the block's address.
bool denseBlocks(const datatype::Datatype& type);

// Collective: 0 when some rank's arguments failed (or it runs in place), 1
// when some rank's types are not dense (every rank then runs pairwise), 2
// direct writes; one allreduce.
Result<int64_t> agreeOnDirectWrite(Communicator& comm, bool argsOk, bool inPlace, const datatype::Datatype& sendtype,
                                   const datatype::Datatype& recvtype);
// The direct-write plan over per-peer blocks, after the vote said 2
// (collective). `agreeLengths`: blocks of a pair may differ in length
// (alltoallv), so the ranks agree whether every pair matched: a mismatch
// fails every rank's init. `sendbuf` and `recvbuf`: the buffers the blocks
// lie in, which Plan::rebind moves them with.
Result<std::unique_ptr<PlanImpl>> makeDirectWrite(Communicator& comm, const void* sendbuf, void* recvbuf,
                                                  std::vector<DirectBlock> blocks, bool agreeLengths);

// The direct-write alltoall (collective). Where some rank's types are not
// dense blocks, every rank builds `instead` (it must be the same on every
// rank): null, pairwise (whose init is local).
using AlltoallBuild = std::function<Result<std::unique_ptr<PlanImpl>>(const AlltoallArgs&)>;
Result<std::unique_ptr<PlanImpl>> makeDirectWriteAlltoall(Communicator& comm, const Result<AlltoallArgs>& checked,
                                                          int64_t throttle, const AlltoallBuild& instead = nullptr);

}  // namespace ibdt::collectives
