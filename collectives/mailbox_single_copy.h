// collectives/mailbox_single_copy.h — the call mailbox's single copy
// (docs/alltoall-shared-memory.md, "Single copy"): a writer whose blocks
// are dense and at least the node's single-copy size (the median of its
// ranks' Context::singleCopyReadMin(): the cost model's crossover on this
// machine) puts their addresses in its row
// instead of the bytes, and each reader copies its block straight out of
// the writer's buffer by cross-memory attach: one copy instead of two.
// The writer's call then completes only once every rank's done counter
// passed it, since its buffer is read until then (mailbox_call_run.h).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ibdt/collectives.h"
#include "ibdt/deadline.h"

namespace ibdt::collectives {

class SingleCopyReads {
 public:
  // Collective over `comm`: every rank's process id, whether every rank
  // can read every peer's memory (each reads a random word of each peer's
  // by cross-memory attach and checks it: seccomp, Yama's ptrace scope and
  // pid namespaces all show there), and the single-copy size, the same on
  // every rank. Off on every rank unless all can.
  static Result<SingleCopyReads> agree(Communicator& comm, Deadline deadline);

  // Whether every rank may read every peer's memory: the same on every rank.
  bool agreed() const { return agreed_; }
  // Whether a dense block of `bytes` goes by address.
  bool byAddress(int64_t bytes) const { return fromBytes_ > 0 && bytes >= fromBytes_; }
  int64_t fromBytes() const { return fromBytes_; }
  // Copies `bytes` at `address` in rank `source`'s process into `into`
  // (our own rank: a memcpy). A dead or unmapped source is an error naming it.
  Status read(int source, uint64_t address, int64_t bytes, std::byte* into) const;

 private:
  std::vector<pid_t> pids_;
  int rank_ = 0;
  bool agreed_ = false;
  int64_t fromBytes_ = 0;  // 0: never
};

}  // namespace ibdt::collectives
