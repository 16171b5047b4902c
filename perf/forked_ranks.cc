#include "perf/forked_ranks.h"

#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "perf/benchmarks.h"
#include "perf/process_exit.h"

namespace ibdt::perf {
namespace {

using Bytes = std::vector<uint8_t>;

// A dead peer's socket fails with EPIPE or ECONNRESET: the peer failed.
Code socketErrorCode(int error) {
  return error == EPIPE || error == ECONNRESET ? Code::kPeerFailed : Code::kSystem;
}

// `peer` is the rank at the other end, for the message.
Status writeAll(int fd, int peer, const void* data, size_t length) {
  const auto* at = static_cast<const uint8_t*>(data);
  while (length > 0) {
    // MSG_NOSIGNAL: a rank that lost its peer reports it instead of dying of SIGPIPE.
    ssize_t n = send(fd, at, length, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return makeError(socketErrorCode(errno), "forked ranks: socket write to rank ", peer, ": ", std::strerror(errno));
    }
    at += n;
    length -= static_cast<size_t>(n);
  }
  return Status::ok();
}

Status readAll(int fd, int peer, void* data, size_t length) {
  auto* at = static_cast<uint8_t*>(data);
  while (length > 0) {
    ssize_t n = read(fd, at, length);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) return makeError(Code::kPeerFailed, "forked ranks: rank ", peer, " closed its socket");
    if (n < 0) {
      return makeError(socketErrorCode(errno), "forked ranks: socket read from rank ", peer, ": ", std::strerror(errno));
    }
    at += n;
    length -= static_cast<size_t>(n);
  }
  return Status::ok();
}

Status sendBytes(int fd, int peer, std::span<const uint8_t> bytes) {
  uint64_t length = bytes.size();
  IBDT_RETURN_IF_ERROR(writeAll(fd, peer, &length, sizeof length));
  return writeAll(fd, peer, bytes.data(), bytes.size());
}

Result<Bytes> receiveBytes(int fd, int peer) {
  uint64_t length = 0;
  IBDT_RETURN_IF_ERROR(readAll(fd, peer, &length, sizeof length));
  if (length > (uint64_t{1} << 30)) {
    return makeError(Code::kProtocol, "forked ranks: a ", length, "-byte value from rank ", peer);
  }
  Bytes bytes(length);
  IBDT_RETURN_IF_ERROR(readAll(fd, peer, bytes.data(), bytes.size()));
  return bytes;
}

// Rank 0 collects every value and sends each child the others' values (with
// two ranks, one value each way: a swap).
messaging::Bootstrap starBootstrap(int rank, int size, std::vector<int> fds) {
  messaging::Bootstrap bootstrap;
  bootstrap.rank = rank;
  bootstrap.size = size;
  bootstrap.localSize = size;
  bootstrap.allgather = [rank, size, fds](std::span<const uint8_t> value) -> Result<std::vector<Bytes>> {
    std::vector<Bytes> all(static_cast<size_t>(size));
    all[static_cast<size_t>(rank)].assign(value.begin(), value.end());
    if (rank != 0) {
      IBDT_RETURN_IF_ERROR(sendBytes(fds[0], 0, value));
      for (int r = 0; r < size; ++r) {
        if (r == rank) continue;
        IBDT_ASSIGN_OR_RETURN(all[static_cast<size_t>(r)], receiveBytes(fds[0], 0));
      }
      return all;
    }
    for (int r = 1; r < size; ++r) {
      IBDT_ASSIGN_OR_RETURN(all[static_cast<size_t>(r)], receiveBytes(fds[static_cast<size_t>(r)], r));
    }
    for (int to = 1; to < size; ++to) {
      for (int r = 0; r < size; ++r) {
        if (r != to) IBDT_RETURN_IF_ERROR(sendBytes(fds[static_cast<size_t>(to)], to, all[static_cast<size_t>(r)]));
      }
    }
    return all;
  };
  return bootstrap;
}

}  // namespace

CoreBinding::CoreBinding(int rank, int ranks) {
  if (sched_getaffinity(0, sizeof saved_, &saved_) != 0 || CPU_COUNT(&saved_) < ranks) return;
  for (int cpu = 0, seen = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &saved_) || seen++ != rank) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    bound_ = sched_setaffinity(0, sizeof one, &one) == 0;
    break;
  }
}

CoreBinding::~CoreBinding() {
  if (bound_) (void)sched_setaffinity(0, sizeof saved_, &saved_);
}

bool ranksFitCores(int ranks) {
  cpu_set_t allowed;
  return sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_COUNT(&allowed) >= ranks;
}

namespace {

// Forks rank `rank` with its star sockets `fds` (rank 0: one per rank, -1
// for itself; others: the one to rank 0); the child closes the other
// descriptors of `all`, runs body and exits with its result. Returns the
// child's pid (-1 if fork failed).
pid_t forkRank(int rank, int ranks, std::vector<int> fds, const std::vector<int>& all,
               const std::function<int(messaging::Bootstrap&)>& body) {
  const pid_t child = fork();
  if (child != 0) return child;
  for (int fd : all) {
    if (fd >= 0 && std::find(fds.begin(), fds.end(), fd) == fds.end()) close(fd);
  }
  messaging::Bootstrap bootstrap = starBootstrap(rank, ranks, std::move(fds));
  int code = 0;
  {
    CoreBinding binding(rank, ranks);
    code = body(bootstrap);
  }
  std::fflush(nullptr);
  _exit(code);
}

// The child's exit code for `status`, printing a failure to stderr.
int exitCodeOf(std::string_view benchmark, int rank, const Status& status) {
  if (status.isOk()) return 0;
  std::fprintf(stderr, "%.*s (rank %d): %s\n", static_cast<int>(benchmark.size()), benchmark.data(), rank,
               status.toString().c_str());
  return 1;
}

}  // namespace

bool runForkedRanks(std::string_view benchmark, int ranks,
                    const std::function<Status(messaging::Bootstrap& bootstrap)>& body) {
  std::vector<int> mine(static_cast<size_t>(ranks), -1);  // rank 0's end of each child's pair
  std::vector<pid_t> children;  // children[i] runs rank i + 1
  bool ok = true;
  std::fflush(nullptr);  // children must not print what rank 0 had buffered
  for (int rank = 1; rank < ranks && ok; ++rank) {
    int sockets[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0) {
      reportFailure(strCat(benchmark, ": socketpair: ", std::strerror(errno)));
      ok = false;
      break;
    }
    std::vector<int> all = mine;
    all.push_back(sockets[0]);
    const pid_t child = forkRank(rank, ranks, {sockets[1]}, all, [&](messaging::Bootstrap& bootstrap) {
      return exitCodeOf(benchmark, rank, body(bootstrap));
    });
    close(sockets[1]);
    if (child < 0) {
      reportFailure(strCat(benchmark, ": fork: ", std::strerror(errno)));
      close(sockets[0]);
      ok = false;
      break;
    }
    mine[static_cast<size_t>(rank)] = sockets[0];
    children.push_back(child);
  }
  if (ok) {
    messaging::Bootstrap bootstrap = starBootstrap(0, ranks, mine);
    Status status;
    {
      CoreBinding binding(0, ranks);
      status = body(bootstrap);
    }
    if (!status.isOk()) {
      reportFailure(strCat(benchmark, " (rank 0): ", status.toString()));
      ok = false;
    }
  }
  for (int fd : mine) {
    if (fd >= 0) close(fd);  // a child blocked on its socket now sees EOF and fails
  }
  for (size_t i = 0; i < children.size(); ++i) {
    int status = 0;
    while (waitpid(children[i], &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {  // its own message, if any, went to stderr
      reportFailure(strCat(benchmark, ": forked rank ", i + 1, " failed (", describeExit(status), ")"));
      ok = false;
    }
  }
  return ok;
}

Result<std::vector<pid_t>> forkRankProcesses(int ranks, const std::function<int(messaging::Bootstrap&)>& body) {
  std::vector<int> zeroEnds(static_cast<size_t>(ranks), -1), otherEnds(static_cast<size_t>(ranks), -1);
  auto closeAll = [&] {
    for (int fd : zeroEnds) if (fd >= 0) close(fd);
    for (int fd : otherEnds) if (fd >= 0) close(fd);
  };
  for (int rank = 1; rank < ranks; ++rank) {
    int sockets[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0) {
      closeAll();
      return makeError(Code::kSystem, "forked ranks: socketpair: ", std::strerror(errno));
    }
    zeroEnds[static_cast<size_t>(rank)] = sockets[0];
    otherEnds[static_cast<size_t>(rank)] = sockets[1];
  }
  std::vector<int> all = zeroEnds;
  all.insert(all.end(), otherEnds.begin(), otherEnds.end());
  std::vector<pid_t> pids;
  std::fflush(nullptr);
  for (int rank = 0; rank < ranks; ++rank) {
    std::vector<int> fds = rank == 0 ? zeroEnds : std::vector<int>{otherEnds[static_cast<size_t>(rank)]};
    const pid_t child = forkRank(rank, ranks, fds, all, body);
    if (child < 0) {
      closeAll();
      for (pid_t pid : pids) kill(pid, SIGKILL);
      for (pid_t pid : pids) waitpid(pid, nullptr, 0);
      return makeError(Code::kSystem, "forked ranks: fork: ", std::strerror(errno));
    }
    pids.push_back(child);
  }
  closeAll();  // the ranks hold their own ends: one closes, its peers see EOF
  return pids;
}

Result<std::string> agreeAcrossRanks(messaging::Bootstrap& bootstrap, const std::string& mine) {
  IBDT_ASSIGN_OR_RETURN(auto all, bootstrap.allgather({reinterpret_cast<const uint8_t*>(mine.data()), mine.size()}));
  for (const auto& each : all) {
    if (!each.empty()) return std::string(each.begin(), each.end());
  }
  return std::string();
}

Result<std::vector<double>> slowestAcrossRanks(messaging::Bootstrap& bootstrap, const std::vector<double>& mine) {
  IBDT_ASSIGN_OR_RETURN(auto all, bootstrap.allgather({reinterpret_cast<const uint8_t*>(mine.data()),
                                                       mine.size() * sizeof(double)}));
  std::vector<double> out(mine.size(), 0.0);
  for (const auto& each : all) {
    if (each.size() != out.size() * sizeof(double)) return makeError(Code::kProtocol, "forked ranks: sample count");
    for (size_t i = 0; i < out.size(); ++i) {
      double value = 0;
      std::memcpy(&value, each.data() + i * sizeof(double), sizeof value);
      out[i] = std::max(out[i], value);
    }
  }
  return out;
}

}  // namespace ibdt::perf
