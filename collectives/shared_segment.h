// collectives/shared_segment.h — what the shared-memory collectives of one
// node's ranks (alltoall_shared_memory.h, alltoallv_shared_memory.h) share:
// the host check, the collective creation of the segment, the run flags
// and the wait for a peer's flag.
//
// A segment starts with one flag line per rank: rank r's run counter, which
// it raises (release) once its part of run k is in the segment; readers wait
// until it reads k or more (acquire).
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "base/shared_region.h"
#include "ibdt/collectives.h"
#include "ibdt/deadline.h"

namespace ibdt::collectives {

inline constexpr int64_t kSharedLine = 64;
// More than this is not a node-local small-block exchange any more (and
// would be mapped into every rank): refused with the size it needed.
inline constexpr int64_t kMaxSharedSegmentBytes = int64_t{1} << 30;

inline int64_t roundToSharedLine(int64_t bytes) { return (bytes + kSharedLine - 1) / kSharedLine * kSharedLine; }

// The same on every process of one boot of one host (boot id and host
// name): ranks that differ here cannot share memory, whatever the node map
// says. Non-negative, so that it can travel negated in a kMin allreduce.
int64_t sharedHostKey();

// Every rank's values (`mine.size()` each, rank r's at r * size), gathered
// by a pairwise alltoall: a dead rank fails every survivor's exchange with
// it, so every survivor returns an error, where a tree's survivors could
// wait for a partner that gave up.
Result<std::vector<int64_t>> gatherFromEveryone(Communicator& comm, std::span<const int64_t> mine,
                                                Deadline deadline = Deadline::never());

// Collective: rank 0 creates a zero-filled segment of `bytes`, says where
// it is, the others map it, and every rank learns that everyone did
// (gatherFromEveryone). Every rank returns the same verdict; `what` names
// the algorithm in errors.
Result<SharedRegion> mapSharedSegment(Communicator& comm, int64_t bytes, std::string_view what,
                                      Deadline deadline = Deadline::never());

// Collective: the smallest `capacity` any rank asks for, after every rank
// checked that all of them run on its host (one boot of one host, and the
// communicator's node map says one node); kInvalidArgument ("`what`: its
// ranks span more than one node") alike on every rank otherwise.
Result<int64_t> agreeOnOneNodeRows(Communicator& comm, int64_t capacity, std::string_view what, Deadline deadline);

inline std::atomic<uint64_t>& sharedFlag(const SharedRegion& segment, int rank) {
  return *reinterpret_cast<std::atomic<uint64_t>*>(segment.data() + rank * kSharedLine);
}

// Progresses the Context (other traffic, the shm liveness sweep) and sets
// `peerFailed` when rank `source` is known dead: what a wait for its flag
// looks at every kSharedWaitsPerCheck empty polls or yields.
inline constexpr uint32_t kSharedWaitsPerCheck = 8;
Status checkSharedPeer(Communicator& comm, int source, uint64_t run, Status& peerFailed);

// Waits until rank `source`'s flag reads `run` or more. The Context is
// progressed meanwhile (every few yields, not at each: a flag that rises
// within a turn or two costs no progress call), so other traffic moves and
// a dead rank is noticed
// (its link fails) instead of being waited for until the deadline: then
// `peerFailed` holds why and the call returns ok (the run failed, the wait
// did not). kTimeout when the deadline passes first.
Status awaitSharedFlag(Communicator& comm, const SharedRegion& segment, int source, uint64_t run, Deadline deadline,
                       std::string_view what, Status& peerFailed);

}  // namespace ibdt::collectives
