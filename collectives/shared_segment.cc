// The shared-memory collectives' common steps (see the header).
#include "collectives/shared_segment.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <string>

#include "base/backoff.h"
#include "collectives/alltoall_args.h"
#include "collectives/alltoall_pairwise.h"
#include "collectives/plan_impl.h"

namespace ibdt::collectives {

int64_t sharedHostKey() {
  std::ifstream file("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(file, id);
  char host[256] = {};
  (void)gethostname(host, sizeof host - 1);
  return static_cast<int64_t>(std::hash<std::string>{}(id + "/" + host) >> 2);
}

Result<std::vector<int64_t>> gatherFromEveryone(Communicator& comm, std::span<const int64_t> mine,
                                                Deadline deadline) {
  const auto p = static_cast<size_t>(comm.size()), k = mine.size();
  std::vector<int64_t> send(p * k), everyone(p * k);
  for (size_t r = 0; r < p; ++r) std::copy(mine.begin(), mine.end(), send.begin() + static_cast<std::ptrdiff_t>(r * k));
  // Built directly (not through alltoall()): an internal exchange, not
  // counted among the communicator's alltoall plans.
  const auto int64s = datatype::Datatype::of<int64_t>();
  const auto count = static_cast<int64_t>(k);
  IBDT_ASSIGN_OR_RETURN(AlltoallArgs args,
                        checkAlltoallArgs(comm, send.data(), count, int64s, everyone.data(), count, int64s));
  IBDT_ASSIGN_OR_RETURN(std::unique_ptr<PlanImpl> impl, makePairwiseAlltoall(comm, args, 0));
  Plan plan(std::move(impl));
  IBDT_RETURN_IF_ERROR(plan.start());
  IBDT_RETURN_IF_ERROR(plan.wait(deadline));
  return everyone;
}

Result<SharedRegion> mapSharedSegment(Communicator& comm, int64_t bytes, std::string_view what, Deadline deadline) {
  SharedRegion segment;
  int64_t where[] = {0, 0, 0, 0};  // created, pid, fd, inode
  Status mapped;
  if (comm.rank() == 0) {
    auto created = SharedRegion::create(what, static_cast<size_t>(bytes));
    if (created.isOk()) {
      segment = std::move(*created);
      where[0] = 1;
      where[1] = getpid();
      where[2] = segment.fd();
      where[3] = static_cast<int64_t>(segment.inode());
    } else {
      mapped = created.status();
    }
  }
  IBDT_ASSIGN_OR_RETURN(std::vector<int64_t> everyone, gatherFromEveryone(comm, where, deadline));
  std::copy(everyone.begin(), everyone.begin() + 4, where);  // rank 0's
  if (comm.rank() != 0 && where[0] == 1) {
    auto opened = SharedRegion::openPeer(static_cast<pid_t>(where[1]), static_cast<int>(where[2]),
                                         static_cast<uint64_t>(where[3]));
    if (opened.isOk()) segment = std::move(*opened);
    else mapped = opened.status();
  } else if (where[0] != 1 && mapped.isOk()) {
    mapped = makeError(Code::kSystem, "rank 0 could not create the segment");
  }
  const int64_t mine = mapped.isOk() ? 1 : 0;
  IBDT_ASSIGN_OR_RETURN(everyone, gatherFromEveryone(comm, std::span(&mine, 1), deadline));
  if (!mapped.isOk()) return mapped.withContext(strCat(what, ": the segment"));
  if (std::count(everyone.begin(), everyone.end(), 0) > 0) {
    return makeError(Code::kSystem, what, ": another rank could not map the segment");
  }
  return segment;
}

Result<int64_t> agreeOnOneNodeRows(Communicator& comm, int64_t capacity, std::string_view what, Deadline deadline) {
  const int64_t mine[] = {sharedHostKey(), capacity};
  IBDT_ASSIGN_OR_RETURN(std::vector<int64_t> everyone, gatherFromEveryone(comm, mine, deadline));
  for (size_t r = 0; r < everyone.size() / 2; ++r) {
    if (everyone[r * 2] != mine[0] || comm.nodeCount() != 1) {
      return makeError(Code::kInvalidArgument, what, ": its ranks span more than one node");
    }
    capacity = std::min(capacity, everyone[r * 2 + 1]);
  }
  return capacity;
}

Status checkSharedPeer(Communicator& comm, int source, uint64_t run, Status& peerFailed) {
  IBDT_RETURN_IF_ERROR(comm.context().progress());
  if (Status peer = comm.context().peerStatus(comm.contextRank(source)); !peer.isOk()) {
    peerFailed = peer.withContext(strCat("rank ", source, " failed before it wrote run ", run));
  }
  return Status::ok();
}

Status awaitSharedFlag(Communicator& comm, const SharedRegion& segment, int source, uint64_t run, Deadline deadline,
                       std::string_view what, Status& peerFailed) {
  // A flag usually rises within a yield or two: a peer sharing our core
  // writes its part in the turn we give it. A progress call reads the
  // Context's rings and activity lines, which other cores write, and cost
  // 4 oversubscribed ranks 10-40 % of an 8-byte all-to-all when made at
  // every yield (docs/alltoall-shared-memory.md). So other traffic, a dead
  // peer and the deadline are looked at every kSharedWaitsPerCheck yields, and
  // at every nap.
  Backoff backoff(comm.context().waitSpins());
  uint32_t yields = 0;
  while (sharedFlag(segment, source).load(std::memory_order_acquire) < run) {
    if (backoff.spinning()) {  // a peer on another core raises it within the spins: no progress call yet
      backoff.pause();
      continue;
    }
    if (backoff.napping() || ++yields % kSharedWaitsPerCheck == 0) {
      IBDT_RETURN_IF_ERROR(checkSharedPeer(comm, source, run, peerFailed));
      if (!peerFailed.isOk()) return Status::ok();
      if (deadline.expired()) {
        return makeError(Code::kTimeout, what, " rank ", comm.rank(), ": run ", run,
                         " did not complete in time (receive from rank ", source, ": its blocks are not packed)");
      }
    }
    backoff.pause();
  }
  return Status::ok();
}

}  // namespace ibdt::collectives
