// bootstrap/launcher/directory_watchdog.h — removes ibdt-run's private
// directory however the launcher ends.
//
// The launcher removes its socket and directory when it ends normally or by
// a signal it handles; a kill -9 (or an OOM kill) gives it no chance. A small
// forked process holds the read end of a pipe whose only writer is the
// launcher: when the launcher is gone, for whatever reason, the read sees
// end-of-file and the watchdog removes what is left. It ignores the
// terminal's signals and holds no descriptor of the job's output.
#pragma once

#include <sys/types.h>

#include <string>

#include "ibdt/status.h"

namespace ibdt::bootstrap {

class DirectoryWatchdog {
 public:
  DirectoryWatchdog() = default;
  // Ends the watchdog (it removes whatever is still there) and reaps it.
  ~DirectoryWatchdog();
  DirectoryWatchdog(const DirectoryWatchdog&) = delete;
  DirectoryWatchdog& operator=(const DirectoryWatchdog&) = delete;

  // Forks the watchdog for `socketPath` inside `directory`. Call while the
  // process has a single thread.
  Status start(const std::string& directory, const std::string& socketPath);

 private:
  int lifeline_ = -1;  // write end: closed (by exit or kill) when the launcher ends
  pid_t pid_ = -1;
};

}  // namespace ibdt::bootstrap
