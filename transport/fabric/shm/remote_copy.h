// transport/fabric/shm/remote_copy.h — moving bytes between this process and
// a peer: a plain memcpy where the peer's memory is a mapped shared segment,
// single-copy cross-memory attach (process_vm_writev/readv with iovec lists
// on both sides) where it is the peer's private memory.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cstdint>
#include <span>

#include "ibdt/fabric.h"

namespace ibdt::fabric::shm {

// One contiguous piece of peer memory. `mapped` is its address in this
// process when it lies in a shared segment we map, else null.
struct RemotePiece {
  uint64_t address = 0;
  size_t length = 0;
  uint8_t* mapped = nullptr;
};

enum class Direction { kToPeer, kFromPeer };

struct CopyOutcome {
  CompletionStatus status = CompletionStatus::kSuccess;
  int error = 0;  // errno of the failed call
};

// Copies between the local iovecs and the remote pieces (equal total lengths).
CopyOutcome copyRemote(Direction direction, pid_t pid, std::span<const iovec> local,
                       std::span<const RemotePiece> remote);

// Copies `length` bytes starting `offset` bytes into the iovec list to/from a flat buffer.
void gatherFromIovecs(std::span<const iovec> iovs, size_t offset, uint8_t* out, size_t length);
void scatterToIovecs(std::span<const iovec> iovs, size_t offset, const uint8_t* in, size_t length);

// Whether cross-memory attach works in this process (probed once on itself:
// seccomp or a kernel without it make it fail with ENOSYS/EPERM). Changes
// no permission.
bool crossMemoryAttachAvailable();
// Lets any process of this user attach to us (PR_SET_PTRACER_ANY), so Yama
// scope 1 does not block our peers' cross-memory attach. Called only by a
// domain that uses cross-memory attach (never with IBDT_SHM_CMA=off): the
// permission also lets such a process ptrace us.
void letPeersAttach();
// Whether letPeersAttach() ran in this process (tests, ibdt-info).
bool peersMayAttach();

}  // namespace ibdt::fabric::shm
