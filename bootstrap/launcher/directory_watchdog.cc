#include "bootstrap/launcher/directory_watchdog.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

namespace ibdt::bootstrap {
namespace {

// In the forked child: wait for the launcher's end, then clean up.
[[noreturn]] void watch(int lifeline, const char* directory, const char* socketPath) {
  // Out of the terminal's process group and deaf to its signals: a Ctrl-C
  // must reach the launcher, not end the watchdog before it is needed.
  ::setpgid(0, 0);
  for (int signal : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) ::signal(signal, SIG_IGN);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // Hold nothing of the job's: a reader of the launcher's output must see
  // end-of-file when the launcher ends.
  int devNull = ::open("/dev/null", O_RDWR);
  for (int fd = 0; fd <= 2; ++fd) {
    if (devNull >= 0) ::dup2(devNull, fd);
  }
  int keep = lifeline > 2 ? lifeline : 3;
  if (keep != lifeline) ::dup2(lifeline, keep);
  ::close_range(3, static_cast<unsigned>(keep) - 1, 0);
  ::close_range(static_cast<unsigned>(keep) + 1, UINT_MAX, 0);
  char byte;
  for (;;) {
    ssize_t got = ::read(keep, &byte, 1);
    if (got > 0 || (got < 0 && errno == EINTR)) continue;
    break;  // end-of-file: the launcher is gone
  }
  ::unlink(socketPath);
  ::rmdir(directory);
  ::_exit(0);
}

}  // namespace

Status DirectoryWatchdog::start(const std::string& directory, const std::string& socketPath) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return makeError(Code::kSystem, "pipe for the watchdog: ", std::strerror(errno));
  pid_t pid = ::fork();
  if (pid < 0) {
    int error = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return makeError(Code::kSystem, "fork for the watchdog: ", std::strerror(error));
  }
  if (pid == 0) {
    ::close(fds[1]);
    watch(fds[0], directory.c_str(), socketPath.c_str());
  }
  ::close(fds[0]);
  lifeline_ = fds[1];
  pid_ = pid;
  return Status::ok();
}

DirectoryWatchdog::~DirectoryWatchdog() {
  if (lifeline_ >= 0) ::close(lifeline_);
  if (pid_ > 0) {
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
}

}  // namespace ibdt::bootstrap
