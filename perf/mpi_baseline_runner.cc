#include "perf/mpi_baseline_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "perf/process_exit.h"

extern char** environ;

namespace ibdt::perf {
namespace {

using Clock = std::chrono::steady_clock;

#ifndef IBDT_MPIEXEC_OPENMPI
#define IBDT_MPIEXEC_OPENMPI ""
#endif
#ifndef IBDT_MPIEXEC_MPICH
#define IBDT_MPIEXEC_MPICH ""
#endif
#ifndef IBDT_MPI_BRIDGE_OPENMPI
#define IBDT_MPI_BRIDGE_OPENMPI ""
#endif
#ifndef IBDT_MPI_BRIDGE_MPICH
#define IBDT_MPI_BRIDGE_MPICH ""
#endif

// The launcher command line for `ranks` processes. Both launchers bind one
// rank per core: Open MPI does so by default for two ranks, MPICH's Hydra
// needs -bind-to core (unbound, its ranks measured ~12 ms round trips for
// 512 bytes on the loaded 2-core build machine, against ~7 us bound).
std::vector<std::string> commandLine(const MpiLibrary& library, const std::string& program, int ranks,
                                     const std::vector<std::string>& args) {
  std::vector<std::string> argv;
  if (ranks > 1) {
    argv = {library.launcher, "-n", std::to_string(ranks)};
    if (library.label == "ompi") {
      argv.emplace_back("--oversubscribe");  // more ranks than cores (the test machine has 2)
    } else if (ranks <= sysconf(_SC_NPROCESSORS_ONLN)) {
      argv.insert(argv.end(), {"-bind-to", "core"});
    }
  }
  argv.push_back(program);
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// The inherited environment, plus what Open MPI's mpirun needs to run as root.
std::vector<std::string> environment(const MpiLibrary& library) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  if (library.label == "ompi" && geteuid() == 0) {
    env.insert(env.end(), {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"});
  }
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Reads what is available on fd into `out`; closes it (fd = -1) at EOF.
void drain(int& fd, std::string& out) {
  char buffer[4096];
  ssize_t n = read(fd, buffer, sizeof buffer);
  if (n > 0) {
    out.append(buffer, static_cast<size_t>(n));
  } else if (n == 0 || errno != EINTR) {
    close(fd);
    fd = -1;
  }
}

std::string tail(const std::string& text, size_t lines) {
  size_t at = text.size();
  while (at > 0 && text[at - 1] == '\n') --at;
  for (size_t seen = 0; at > 0; --at) {
    if (text[at - 1] == '\n' && ++seen == lines) break;
  }
  std::string out = text.substr(at);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

struct Finished {
  int waitStatus = 0;
  bool timedOut = false;
  std::string out, err;
};

// Runs argv in its own process group, collecting stdout and stderr; after
// `timeout` the group gets SIGTERM, then SIGKILL two seconds later.
Result<Finished> run(std::vector<std::string> argv, std::vector<std::string> env, std::chrono::seconds timeout) {
  int outPipe[2], errPipe[2];
  if (pipe2(outPipe, O_CLOEXEC) != 0) return makeError(Code::kSystem, "pipe2: ", std::strerror(errno));
  if (pipe2(errPipe, O_CLOEXEC) != 0) {
    close(outPipe[0]);
    close(outPipe[1]);
    return makeError(Code::kSystem, "pipe2: ", std::strerror(errno));
  }
  std::vector<char*> args = pointers(argv), envp = pointers(env);
  const pid_t pid = fork();
  if (pid == 0) {  // only async-signal-safe calls until exec
    setpgid(0, 0);
    dup2(outPipe[1], STDOUT_FILENO);
    dup2(errPipe[1], STDERR_FILENO);
    execve(args[0], args.data(), envp.data());
    const char* failed = "exec failed\n";
    (void)!write(STDERR_FILENO, failed, std::strlen(failed));
    _exit(127);
  }
  const int forkErrno = errno;
  close(outPipe[1]);
  close(errPipe[1]);
  Finished done;
  if (pid < 0) {
    close(outPipe[0]);
    close(errPipe[0]);
    return makeError(Code::kSystem, "fork: ", std::strerror(forkErrno));
  }
  setpgid(pid, pid);  // also here, so the group exists before any kill below
  int fds[2] = {outPipe[0], errPipe[0]};
  const Clock::time_point deadline = Clock::now() + timeout;
  Clock::time_point killAt = Clock::time_point::max();
  while (fds[0] >= 0 || fds[1] >= 0) {
    pollfd polled[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
    const Clock::time_point wake = done.timedOut ? killAt : deadline;
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(wake - Clock::now()).count();
    const int ready = poll(polled, 2, static_cast<int>(std::clamp<int64_t>(wait, 0, 1000)));
    if (ready < 0 && errno != EINTR) break;
    for (int i = 0; i < 2 && ready > 0; ++i) {
      if (fds[i] >= 0 && polled[i].revents != 0) drain(fds[i], i == 0 ? done.out : done.err);
    }
    if (!done.timedOut && Clock::now() >= deadline) {
      done.timedOut = true;
      kill(-pid, SIGTERM);
      killAt = Clock::now() + std::chrono::seconds(2);
    } else if (done.timedOut && Clock::now() >= killAt) {
      kill(-pid, SIGKILL);
      break;  // a grandchild may still hold the pipes open: stop reading
    }
  }
  for (int fd : fds) {
    if (fd >= 0) close(fd);
  }
  // The pipes are closed; the program may still run (it closed them itself).
  for (;;) {
    const pid_t ended = waitpid(pid, &done.waitStatus, done.timedOut ? 0 : WNOHANG);
    if (ended == pid || (ended < 0 && errno != EINTR)) break;
    if (ended == 0 && Clock::now() >= deadline) {
      done.timedOut = true;
      kill(-pid, SIGKILL);
    } else if (ended == 0) {
      poll(nullptr, 0, 10);
    }
  }
  return done;
}

}  // namespace

const std::vector<MpiLibrary>& mpiLibraries() {
  static const std::vector<MpiLibrary> libraries = [] {
    std::vector<MpiLibrary> out;
#if defined(IBDT_MPI_PACK_OPENMPI) && defined(IBDT_MPI_VECTOR_OPENMPI) && defined(IBDT_MPI_ALLTOALL_OPENMPI) && \
    defined(IBDT_MPI_ALLTOALLV_OPENMPI)
    out.push_back({"Open MPI", "ompi", IBDT_MPIEXEC_OPENMPI, IBDT_MPI_PACK_OPENMPI, IBDT_MPI_VECTOR_OPENMPI,
                   IBDT_MPI_ALLTOALL_OPENMPI, IBDT_MPI_ALLTOALLV_OPENMPI, IBDT_MPI_BRIDGE_OPENMPI});
#endif
#if defined(IBDT_MPI_PACK_MPICH) && defined(IBDT_MPI_VECTOR_MPICH) && defined(IBDT_MPI_ALLTOALL_MPICH) && \
    defined(IBDT_MPI_ALLTOALLV_MPICH)
    out.push_back({"MPICH", "mpich", IBDT_MPIEXEC_MPICH, IBDT_MPI_PACK_MPICH, IBDT_MPI_VECTOR_MPICH,
                   IBDT_MPI_ALLTOALL_MPICH, IBDT_MPI_ALLTOALLV_MPICH, IBDT_MPI_BRIDGE_MPICH});
#endif
    return out;
  }();
  return libraries;
}

std::string mpiLaunchDescription(const MpiLibrary& library, int ranks) {
  std::string out;
  for (const std::string& word : commandLine(library, "", ranks, {})) {
    if (!word.empty()) out += (out.empty() ? "" : " ") + word;
  }
  return out;
}

Result<std::vector<nlohmann::json>> runMpiBaseline(const MpiLibrary& library, const std::string& program, int ranks,
                                                   const std::vector<std::string>& args,
                                                   std::chrono::seconds timeout) {
  if (ranks > 1 && library.launcher.empty()) {
    return makeError(Code::kUnsupported, library.name, ": no launcher was found when ibdt-bench was built");
  }
  std::vector<std::string> argv = commandLine(library, program, ranks, args);
  std::ostringstream command;
  for (const std::string& word : argv) command << (command.tellp() > 0 ? " " : "") << word;
  IBDT_ASSIGN_OR_RETURN(Finished done, run(std::move(argv), environment(library), timeout));

  std::vector<nlohmann::json> lines;
  std::string failure;
  std::istringstream out(done.out);
  for (std::string line; std::getline(out, line);) {
    if (line.empty() || line.front() != '{') continue;  // launcher chatter
    nlohmann::json parsed = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) continue;
    if (parsed.contains("error") && failure.empty()) failure = parsed["error"].get<std::string>();
    lines.push_back(std::move(parsed));
  }
  if (done.timedOut) failure = "no end after " + std::to_string(timeout.count()) + " s, stopped";
  if (failure.empty() && !(WIFEXITED(done.waitStatus) && WEXITSTATUS(done.waitStatus) == 0)) {
    failure = describeExit(done.waitStatus);
  }
  if (failure.empty()) return lines;
  std::string stderrTail = tail(done.err, 3);
  return makeError(Code::kSystem, "`", command.str(), "`: ", failure,
                   stderrTail.empty() ? "" : " (stderr: " + stderrTail + ")");
}

std::vector<nlohmann::json> runMpiRows(const MpiLibrary& library, const std::string& program, int ranks,
                                       const std::vector<std::string>& args, std::chrono::seconds timeout,
                                       Report& report, const std::string& key, const std::string& launchNote) {
  auto lines = runMpiBaseline(library, program, ranks, args, timeout);
  if (!lines.isOk()) {
    report.note(key, "not measured: " + lines.status().toString());
    return {};
  }
  std::vector<nlohmann::json> rows;
  for (nlohmann::json& line : *lines) {
    if (line.contains("library")) {  // one note per rank count: the launcher line differs
      const std::string launch = mpiLaunchDescription(library, ranks);
      report.note(library.name + " (" + std::to_string(ranks) + (ranks == 1 ? " rank)" : " ranks)"),
                  line["library"].get<std::string>() +
                      (launch.empty() ? ", run as a singleton (no launcher)" : ", run as `" + launch + "`") +
                      launchNote);
    }
    if (line.contains("skipped")) {
      report.note(key + ", " + line["skipped"].get<std::string>(), "skipped: " + line["why"].get<std::string>());
    }
    if (line.contains("row")) rows.push_back(std::move(line));
  }
  return rows;
}

Summary summaryOf(const nlohmann::json& triple) {
  return {triple.at(0).get<double>(), triple.at(1).get<double>(), triple.at(2).get<double>(), 0};
}

}  // namespace ibdt::perf
