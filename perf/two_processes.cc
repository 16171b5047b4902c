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

}  // namespace ibdt::perf
