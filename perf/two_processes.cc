#include "perf/two_processes.h"

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "perf/benchmarks.h"

namespace ibdt::perf {

bool runTwoProcesses(std::string_view benchmark, const std::function<Status(int fd, int rank)>& body) {
  int sockets[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0) {
    reportFailure(strCat(benchmark, ": socketpair: ", std::strerror(errno)));
    return false;
  }
  std::fflush(nullptr);  // the child must not print what rank 0 had buffered
  pid_t child = fork();
  if (child < 0) {
    reportFailure(strCat(benchmark, ": fork: ", std::strerror(errno)));
    close(sockets[0]);
    close(sockets[1]);
    return false;
  }
  if (child == 0) {
    close(sockets[0]);
    Status status = body(sockets[1], 1);
    if (!status.isOk()) std::fprintf(stderr, "%.*s (rank 1): %s\n", static_cast<int>(benchmark.size()),
                                     benchmark.data(), status.toString().c_str());
    std::fflush(nullptr);
    _exit(status.isOk() ? 0 : 1);
  }
  close(sockets[1]);
  Status status = body(sockets[0], 0);
  close(sockets[0]);
  int childStatus = 0;
  waitpid(child, &childStatus, 0);
  if (!status.isOk()) reportFailure(strCat(benchmark, ": ", status.toString()));
  if (!WIFEXITED(childStatus) || WEXITSTATUS(childStatus) != 0) reportFailure(strCat(benchmark, ": the peer process failed"));
  return status.isOk();
}

messaging::Bootstrap socketBootstrap(int socket, int rank) {
  messaging::Bootstrap bootstrap;
  bootstrap.rank = rank;
  bootstrap.size = 2;
  bootstrap.allgather = [socket, rank](std::span<const uint8_t> value)
      -> Result<std::vector<std::vector<uint8_t>>> {
    uint64_t length = value.size();
    if (write(socket, &length, sizeof(length)) != sizeof(length) ||
        (length > 0 && write(socket, value.data(), length) != static_cast<ssize_t>(length))) {
      return makeError(Code::kSystem, "two-process bootstrap: socket write: ", std::strerror(errno));
    }
    uint64_t peerLength = 0;
    if (read(socket, &peerLength, sizeof(peerLength)) != sizeof(peerLength)) {
      return makeError(Code::kSystem, "two-process bootstrap: socket read failed");
    }
    std::vector<uint8_t> peer(peerLength);
    size_t got = 0;
    while (got < peerLength) {
      ssize_t n = read(socket, peer.data() + got, peerLength - got);
      if (n <= 0) return makeError(Code::kSystem, "two-process bootstrap: socket read failed");
      got += static_cast<size_t>(n);
    }
    std::vector<std::vector<uint8_t>> all(2);
    all[static_cast<size_t>(rank)].assign(value.begin(), value.end());
    all[static_cast<size_t>(1 - rank)] = std::move(peer);
    return all;
  };
  return bootstrap;
}

}  // namespace ibdt::perf
