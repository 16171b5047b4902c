// The call mailbox's single copy (see the header).
#include "collectives/mailbox_single_copy.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <random>
#include <span>

#include "collectives/shared_segment.h"

namespace ibdt::collectives {

namespace {

// This process's probe word: random, so that processes in different pid
// namespaces that share a pid number are told apart (a read of the wrong
// process returns another value, or fails).
const uint64_t& processToken() {
  static const uint64_t token = [] {
    std::random_device random;
    return (uint64_t{random()} << 32 | random()) | 1;
  }();
  return token;
}

}  // namespace

Result<SingleCopyReads> SingleCopyReads::agree(Communicator& comm, Deadline deadline) {
  // Process id, probe token and its address, and the block size from
  // which this rank would lend (0: never).
  constexpr int kWords = 4;
  const uint64_t& token = processToken();
  const int64_t mine[kWords] = {static_cast<int64_t>(getpid()), static_cast<int64_t>(token),
                                static_cast<int64_t>(reinterpret_cast<uintptr_t>(&token)),
                                comm.context().singleCopyReadMin()};
  IBDT_ASSIGN_OR_RETURN(std::vector<int64_t> everyone, gatherFromEveryone(comm, mine, deadline));
  SingleCopyReads reads;
  reads.rank_ = comm.rank();
  // Every peer's token read where it says it is: cross-memory attach works
  // here, the peer lets us attach (Yama's ptrace scope, dumpable), and the
  // pid names the peer's process in our namespace.
  int64_t canRead = 1;
  // One size for the node, the median of the ranks' (never counting as
  // the largest): each rank's measurement is noisy (one VM's memcpy rate
  // varied 6-11 B/ns by run), and a rank that alone kept its blocks in a
  // row too small for them would send a whole large call by messages.
  std::vector<int64_t> sizes;
  for (int r = 0; r < comm.size(); ++r) {
    const int64_t* theirs = everyone.data() + static_cast<size_t>(r) * kWords;
    reads.pids_.push_back(static_cast<pid_t>(theirs[0]));
    sizes.push_back(theirs[3] > 0 ? theirs[3] : std::numeric_limits<int64_t>::max());
  }
  for (int r = 0; r < comm.size() && canRead != 0; ++r) {
    const int64_t* theirs = everyone.data() + static_cast<size_t>(r) * kWords;
    uint64_t got = 0;
    Status read = reads.read(r, static_cast<uint64_t>(theirs[2]), sizeof got, reinterpret_cast<std::byte*>(&got));
    if (!read.isOk() || got != static_cast<uint64_t>(theirs[1])) canRead = 0;
  }
  // Whether every rank can read every peer: the same verdict everywhere.
  IBDT_ASSIGN_OR_RETURN(std::vector<int64_t> verdicts,
                        gatherFromEveryone(comm, std::span<const int64_t>(&canRead, 1), deadline));
  reads.agreed_ = std::all_of(verdicts.begin(), verdicts.end(), [](int64_t v) { return v != 0; });
  std::nth_element(sizes.begin(), sizes.begin() + static_cast<std::ptrdiff_t>(sizes.size() / 2), sizes.end());
  const int64_t median = sizes[sizes.size() / 2];
  if (reads.agreed_ && median != std::numeric_limits<int64_t>::max()) reads.fromBytes_ = median;
  return reads;
}

Status SingleCopyReads::read(int source, uint64_t address, int64_t bytes, std::byte* into) const {
  if (source == rank_) {
    std::memcpy(into, reinterpret_cast<const std::byte*>(address), static_cast<size_t>(bytes));
    return Status::ok();
  }
  int64_t done = 0;
  while (done < bytes) {  // the kernel may stop short of the whole length
    iovec local{into + done, static_cast<size_t>(bytes - done)};
    iovec remote{reinterpret_cast<void*>(address + static_cast<uint64_t>(done)), static_cast<size_t>(bytes - done)};
    const ssize_t got = process_vm_readv(pids_[static_cast<size_t>(source)], &local, 1, &remote, 1, 0);
    if (got <= 0) {
      const int error = got < 0 ? errno : EFAULT;
      return makeError(error == ESRCH ? Code::kPeerFailed : Code::kInternal, "reading ", bytes,
                       " bytes of rank ", source, "'s buffer (process ", pids_[static_cast<size_t>(source)],
                       ") by cross-memory attach: ", std::strerror(error));
    }
    done += got;
  }
  return Status::ok();
}

}  // namespace ibdt::collectives
