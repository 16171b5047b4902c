// bootstrap/launcher/job.h — one ibdt-run job: the ranks, their output, their
// ends, and the store they rendezvous through.
//
// Single-threaded except for the store server's thread. Signals (SIGCHLD,
// SIGINT, SIGTERM, SIGHUP) are taken through a signalfd, so they are handled
// in the same poll loop as the output pipes.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bootstrap/launcher/directory_watchdog.h"
#include "bootstrap/launcher/line_prefixer.h"
#include "bootstrap/launcher/options.h"
#include "bootstrap/launcher/store_server.h"

namespace ibdt::bootstrap {

class Job {
 public:
  explicit Job(LaunchOptions options);
  ~Job();
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // Runs the job to its end; returns ibdt-run's exit status.
  int run();

 private:
  using Clock = std::chrono::steady_clock;
  struct Rank {
    pid_t pid = -1;
    bool running = false;
    int outFd = -1;
    int errFd = -1;
    std::unique_ptr<LinePrefixer> out;
    std::unique_ptr<LinePrefixer> err;
  };

  Status prepare();
  Status spawn(int rank, const std::vector<std::string>& environment);
  void loop();
  void onSignal();
  void reapChildren();
  void onRankEnded(int rank, int waitStatus);
  void drainPipe(int& fd, LinePrefixer& prefixer);
  // Stops every running rank: `signal` now, SIGKILL after the grace period.
  void stopAll(int signal);
  bool anyRunning() const;
  void cleanup();

  LaunchOptions options_;
  std::vector<Rank> ranks_;
  std::string directory_;
  std::string socketPath_;
  std::unique_ptr<StoreServer> server_;
  DirectoryWatchdog watchdog_;
  rlimit rankDescriptorLimit_{};  // the caller's limit, restored for the ranks
  int signalFd_ = -1;
  std::optional<Clock::time_point> jobDeadline_;
  std::optional<Clock::time_point> killDeadline_;
  std::optional<Clock::time_point> drainDeadline_;
  bool stopping_ = false;
  int exitCode_ = 0;  // the first failure decides it
};

}  // namespace ibdt::bootstrap
