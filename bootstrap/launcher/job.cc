#include "bootstrap/launcher/job.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "bootstrap/launcher/descriptor_limit.h"
#include "bootstrap/node_map.h"

extern char** environ;

namespace ibdt::bootstrap {
namespace {

// How long stopped ranks get between SIGTERM and SIGKILL.
constexpr auto kKillGrace = std::chrono::seconds(2);
// How long output pipes may stay open after every rank ended (a leftover
// grandchild may hold them).
constexpr auto kDrainGrace = std::chrono::milliseconds(500);
constexpr int kTimeoutExitCode = 124;  // as timeout(1)
constexpr int kHandledSignals[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP};

void say(const std::string& line) {
  std::string out = "ibdt-run: " + line + "\n";
  ssize_t ignored = ::write(STDERR_FILENO, out.data(), out.size());
  (void)ignored;
}

std::string signalName(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  const char* text = sigdescr_np(signal);
  return strCat("signal ", signal, " (SIG", abbrev != nullptr ? abbrev : "?", ", ", text != nullptr ? text : "?", ")");
}

std::string describeEnd(int waitStatus) {
  if (WIFEXITED(waitStatus)) return strCat("exited with code ", WEXITSTATUS(waitStatus));
  if (WIFSIGNALED(waitStatus)) return strCat("was killed by ", signalName(WTERMSIG(waitStatus)));
  return "ended";
}

Result<std::string> randomToken() {
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = ::getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return makeError(Code::kSystem, "getrandom: ", std::strerror(errno));
    got += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char byte : bytes) {
    token.push_back(kHex[byte >> 4]);
    token.push_back(kHex[byte & 15]);
  }
  return token;
}

// A fresh 0700 directory for the socket; $TMPDIR unless its path is too
// long for a socket address.
Result<std::string> makePrivateDirectory() {
  const char* tmp = std::getenv("TMPDIR");
  std::string base = (tmp != nullptr && *tmp != '\0' && std::strlen(tmp) < 64) ? tmp : "/tmp";
  std::string pattern = base + "/ibdt-run-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    return makeError(Code::kSystem, "mkdtemp '", pattern, "': ", std::strerror(errno));
  }
  return pattern;
}

}  // namespace

Job::Job(LaunchOptions options) : options_(std::move(options)), ranks_(static_cast<size_t>(options_.ranks)) {}

Job::~Job() { cleanup(); }

Status Job::prepare() {
  sigset_t handled;
  sigemptyset(&handled);
  for (int signal : kHandledSignals) sigaddset(&handled, signal);
  if (::sigprocmask(SIG_BLOCK, &handled, nullptr) != 0) {
    return makeError(Code::kSystem, "sigprocmask: ", std::strerror(errno));
  }
  signalFd_ = ::signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signalFd_ < 0) return makeError(Code::kSystem, "signalfd: ", std::strerror(errno));
  ::signal(SIGPIPE, SIG_IGN);  // a closed stdout must not kill the launcher before it stops the job

  IBDT_ASSIGN_OR_RETURN(rankDescriptorLimit_, raiseDescriptorLimit());
  IBDT_RETURN_IF_ERROR(checkDescriptorBudget(options_));
  IBDT_ASSIGN_OR_RETURN(std::string token, randomToken());
  IBDT_ASSIGN_OR_RETURN(directory_, makePrivateDirectory());
  socketPath_ = directory_ + "/store.sock";
  IBDT_RETURN_IF_ERROR(watchdog_.start(directory_, socketPath_));  // before the store thread exists
  server_ = std::make_unique<StoreServer>(token, blockNodeMap(options_.ranks, options_.nodes));
  IBDT_RETURN_IF_ERROR(server_->listen(socketPath_));

  // The environment of the ranks, built before forking (no allocation in the child).
  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string_view var(*entry);
    if (var.starts_with("IBDT_RUN_")) continue;
    environment.emplace_back(var);
  }
  environment.push_back("IBDT_RUN_SOCKET=" + socketPath_);
  environment.push_back("IBDT_RUN_TOKEN=" + token);
  environment.push_back("IBDT_RUN_RANK=");  // completed per rank by spawn()
  for (int rank = 0; rank < options_.ranks; ++rank) IBDT_RETURN_IF_ERROR(spawn(rank, environment));
  server_->serve();
  return Status::ok();
}

Status Job::spawn(int rank, const std::vector<std::string>& environment) {
  Rank& self = ranks_[static_cast<size_t>(rank)];
  std::vector<std::string> env = environment;
  env.back() += std::to_string(rank);
  std::vector<char*> envp;
  for (std::string& var : env) envp.push_back(var.data());
  envp.push_back(nullptr);
  std::vector<char*> argv;
  for (std::string& word : options_.command) argv.push_back(word.data());
  argv.push_back(nullptr);

  int outPipe[2] = {-1, -1};
  int errPipe[2] = {-1, -1};
  if (options_.prefixOutput) {
    if (::pipe2(outPipe, O_CLOEXEC) != 0 || ::pipe2(errPipe, O_CLOEXEC) != 0) {
      return makeError(Code::kSystem, "pipe for rank ", rank, ": ", std::strerror(errno));
    }
  }
  int devNull = rank == 0 ? -1 : ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  pid_t launcherPid = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) return makeError(Code::kSystem, "fork for rank ", rank, ": ", std::strerror(errno));
  if (pid == 0) {
    // Child: only async-signal-safe calls from here to exec.
    ::setpgid(0, 0);  // its own group, so stopping it reaches its children too
    // If ibdt-run itself is killed (kill -9, a test harness timeout), no rank
    // outlives it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != launcherPid) ::_exit(128 + SIGKILL);  // it died before prctl
    if (options_.prefixOutput) {
      ::dup2(outPipe[1], STDOUT_FILENO);
      ::dup2(errPipe[1], STDERR_FILENO);
    }
    if (devNull >= 0) ::dup2(devNull, STDIN_FILENO);  // only rank 0 reads the launcher's stdin
    ::signal(SIGPIPE, SIG_DFL);
    ::setrlimit(RLIMIT_NOFILE, &rankDescriptorLimit_);  // the launcher's raised limit is its own
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execvpe(argv[0], argv.data(), envp.data());
    int error = errno;
    const char* what = "ibdt-run: cannot execute ";
    ssize_t ignored = ::write(STDERR_FILENO, what, std::strlen(what));
    ignored = ::write(STDERR_FILENO, argv[0], std::strlen(argv[0]));
    ignored = ::write(STDERR_FILENO, ": ", 2);
    ignored = ::write(STDERR_FILENO, std::strerror(error), std::strlen(std::strerror(error)));
    ignored = ::write(STDERR_FILENO, "\n", 1);
    (void)ignored;
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here: no race with an early stopAll()
  if (devNull >= 0) ::close(devNull);
  self.pid = pid;
  self.running = true;
  if (options_.prefixOutput) {
    ::close(outPipe[1]);
    ::close(errPipe[1]);
    self.outFd = outPipe[0];
    self.errFd = errPipe[0];
    ::fcntl(self.outFd, F_SETFL, O_NONBLOCK);  // drainPipe() reads until EAGAIN
    ::fcntl(self.errFd, F_SETFL, O_NONBLOCK);
    // Padded to the widest rank, so columns line up: "[ 3] " beside "[12] ".
    std::string number = std::to_string(rank);
    std::string widest = std::to_string(options_.ranks - 1);
    std::string prefix = strCat("[", std::string(widest.size() - number.size(), ' '), number, "] ");
    self.out = std::make_unique<LinePrefixer>(STDOUT_FILENO, prefix);
    self.err = std::make_unique<LinePrefixer>(STDERR_FILENO, prefix);
  }
  return Status::ok();
}

int Job::run() {
  if (Status status = prepare(); !status.isOk()) {
    say(status.toString());
    stopAll(SIGKILL);
    while (anyRunning()) {
      ::usleep(1000);
      reapChildren();
    }
    return 1;
  }
  if (options_.timeoutSeconds > 0) {
    jobDeadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(options_.timeoutSeconds));
  }
  loop();
  return exitCode_;
}

void Job::loop() {
  for (;;) {
    bool pipesOpen = false;
    std::vector<pollfd> fds{{signalFd_, POLLIN, 0}};
    for (Rank& rank : ranks_) {
      for (int fd : {rank.outFd, rank.errFd}) {
        if (fd >= 0) {
          fds.push_back({fd, POLLIN, 0});
          pipesOpen = true;
        }
      }
    }
    if (!anyRunning()) {
      if (!pipesOpen) return;
      if (!drainDeadline_) drainDeadline_ = Clock::now() + kDrainGrace;
    }
    Clock::time_point next = Clock::time_point::max();
    for (const auto& deadline : {jobDeadline_, killDeadline_, drainDeadline_}) {
      if (deadline) next = std::min(next, *deadline);
    }
    int timeoutMs = -1;
    if (next != Clock::time_point::max()) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(next - Clock::now()).count();
      timeoutMs = static_cast<int>(std::clamp<long long>(left, 0, INT_MAX));
    }
    if (::poll(fds.data(), fds.size(), timeoutMs) < 0 && errno != EINTR) {
      say(strCat("poll: ", std::strerror(errno)));
      stopAll(SIGKILL);
    }
    if (fds[0].revents & POLLIN) onSignal();
    for (Rank& rank : ranks_) {
      if (rank.outFd >= 0) drainPipe(rank.outFd, *rank.out);
      if (rank.errFd >= 0) drainPipe(rank.errFd, *rank.err);
    }
    Clock::time_point now = Clock::now();
    if (jobDeadline_ && now >= *jobDeadline_) {
      jobDeadline_.reset();
      std::string still;
      for (size_t r = 0; r < ranks_.size(); ++r) {
        if (ranks_[r].running) still += strCat(still.empty() ? "" : ", ", r);
      }
      say(strCat("the job timed out after ", options_.timeoutSeconds, " s (--timeout); ranks still running: ", still,
                 "; stopping them"));
      if (exitCode_ == 0) exitCode_ = kTimeoutExitCode;
      stopAll(SIGTERM);
    }
    if (killDeadline_ && now >= *killDeadline_) {
      killDeadline_.reset();
      if (anyRunning()) say("ranks did not stop within the grace period; sending SIGKILL");
      stopAll(SIGKILL);
    }
    if (drainDeadline_ && now >= *drainDeadline_) {
      for (Rank& rank : ranks_) {
        for (int* fd : {&rank.outFd, &rank.errFd}) {
          if (*fd >= 0) ::close(*fd);
          *fd = -1;
        }
      }
    }
  }
}

void Job::drainPipe(int& fd, LinePrefixer& prefixer) {
  char chunk[65536];
  for (;;) {
    ssize_t got = ::read(fd, chunk, sizeof(chunk));
    if (got > 0) {
      prefixer.feed(std::string_view(chunk, static_cast<size_t>(got)));
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && errno == EAGAIN) return;
    if (got == 0 || got < 0) {
      prefixer.finish();
      ::close(fd);
      fd = -1;
      return;
    }
  }
}

void Job::onSignal() {
  signalfd_siginfo info;
  while (::read(signalFd_, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
    int signal = static_cast<int>(info.ssi_signo);
    if (signal == SIGCHLD) {
      reapChildren();
      continue;
    }
    if (stopping_) {
      say(strCat("got ", signalName(signal), " again; killing the job"));
      stopAll(SIGKILL);
      continue;
    }
    say(strCat("got ", signalName(signal), "; stopping the job"));
    if (exitCode_ == 0) exitCode_ = 128 + signal;
    stopAll(signal);
  }
  reapChildren();  // a SIGCHLD may have been coalesced with another signal
}

void Job::reapChildren() {
  for (;;) {
    int waitStatus = 0;
    pid_t pid = ::waitpid(-1, &waitStatus, WNOHANG);
    if (pid <= 0) return;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      if (ranks_[r].pid == pid) onRankEnded(static_cast<int>(r), waitStatus);
    }
  }
}

void Job::onRankEnded(int rank, int waitStatus) {
  Rank& self = ranks_[static_cast<size_t>(rank)];
  self.running = false;
  std::string how = describeEnd(waitStatus);
  server_->rankEnded(rank, how);
  bool failed = !(WIFEXITED(waitStatus) && WEXITSTATUS(waitStatus) == 0);
  if (!failed || stopping_) return;
  exitCode_ = WIFEXITED(waitStatus) ? WEXITSTATUS(waitStatus) : 128 + WTERMSIG(waitStatus);
  say(strCat("rank ", rank, " (pid ", self.pid, ") ", how, "; stopping the other ranks"));
  stopAll(SIGTERM);
}

void Job::stopAll(int signal) {
  if (!stopping_) {
    stopping_ = true;
    killDeadline_ = Clock::now() + kKillGrace;
  }
  for (const Rank& rank : ranks_) {
    // The whole process group: the rank and whatever it started. Also for
    // ranks that already ended, whose children may linger.
    if (rank.pid > 0) ::kill(-rank.pid, signal);
  }
}

bool Job::anyRunning() const {
  return std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& rank) { return rank.running; });
}

void Job::cleanup() {
  if (server_) server_->stop();
  server_.reset();
  for (Rank& rank : ranks_) {
    for (int* fd : {&rank.outFd, &rank.errFd}) {
      if (*fd >= 0) ::close(*fd);
      *fd = -1;
    }
  }
  if (!socketPath_.empty()) ::unlink(socketPath_.c_str());
  if (!directory_.empty()) ::rmdir(directory_.c_str());
  socketPath_.clear();
  directory_.clear();
  if (signalFd_ >= 0) ::close(signalFd_);
  signalFd_ = -1;
}

}  // namespace ibdt::bootstrap
