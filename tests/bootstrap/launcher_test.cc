// ibdt-run end to end: output forwarding and every way a job can go wrong.
// Each case launches the real ibdt-run with tests/bootstrap/rank_behaviour.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <regex>
#include <string>

#include "bootstrap/launcher/run_command.h"

namespace ibdt::test {
namespace {

using bootstrap::CommandResult;
using bootstrap::runCommand;

CommandResult launch(std::vector<std::string> options, std::vector<std::string> program) {
  std::vector<std::string> argv{IBDT_RUN_PATH};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.push_back("--");
  argv.push_back(RANK_BEHAVIOUR_PATH);
  argv.insert(argv.end(), program.begin(), program.end());
  return runCommand(argv);
}

bool contains(const std::string& text, const std::string& piece) { return text.find(piece) != std::string::npos; }

TEST(IbdtRun, PrefixesEveryLineWithTheRank) {
  CommandResult run = launch({"-n", "3", "--timeout", "30"}, {"echo"});
  ASSERT_EQ(run.exitCode, 0) << run.err;
  for (int rank = 0; rank < 3; ++rank) {
    std::string r = std::to_string(rank);
    EXPECT_TRUE(contains(run.out, "[" + r + "] hello from rank " + r + " of 3\n")) << run.out;
    EXPECT_TRUE(contains(run.err, "[" + r + "] complaint from rank " + r + "\n")) << run.err;
  }
}

TEST(IbdtRun, PrefixesArePaddedToTheWidestRank) {
  CommandResult run = launch({"-n", "11", "--timeout", "60"}, {"echo"});
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_TRUE(contains(run.out, "[ 3] hello from rank 3 of 11\n")) << run.out;
  EXPECT_TRUE(contains(run.out, "[10] hello from rank 10 of 11\n")) << run.out;
}

TEST(IbdtRun, PrefixCanBeSwitchedOff) {
  CommandResult run = launch({"-n", "2", "--no-prefix"}, {"echo"});
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_TRUE(contains(run.out, "\nhello from rank 1 of 2\n") || run.out.starts_with("hello from rank 1 of 2\n")) << run.out;
  EXPECT_FALSE(contains(run.out, "[0]")) << run.out;
}

TEST(IbdtRun, SimulatedNodesGiveDistinctNodeIds) {
  CommandResult run = launch({"-n", "4", "--nodes", "2"}, {"placement"});
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_TRUE(contains(run.out, "[0] rank=0 size=4 node=0 nodes=2 local=0/2 backend=ibdt-run")) << run.out;
  EXPECT_TRUE(contains(run.out, "[1] rank=1 size=4 node=0 nodes=2 local=1/2")) << run.out;
  EXPECT_TRUE(contains(run.out, "[2] rank=2 size=4 node=1 nodes=2 local=0/2")) << run.out;
  EXPECT_TRUE(contains(run.out, "[3] rank=3 size=4 node=1 nodes=2 local=1/2")) << run.out;
}

TEST(IbdtRun, ARankExitingEarlyFailsTheJobWithItsCode) {
  CommandResult run = launch({"-n", "4", "--timeout", "60"}, {"exit-code", "2", "5"});
  EXPECT_EQ(run.exitCode, 5) << run.err;
  EXPECT_TRUE(contains(run.err, "ibdt-run: rank 2 (pid ")) << run.err;
  EXPECT_TRUE(contains(run.err, "exited with code 5; stopping the other ranks")) << run.err;
}

TEST(IbdtRun, ARankThatExitsCleanlyBeforeAFenceFailsThePeersFence) {
  CommandResult run = launch({"-n", "3", "--timeout", "60"}, {"exit-code", "0", "0"});
  EXPECT_EQ(run.exitCode, 1) << run.err;
  // The waiting ranks learn from the store who is missing, rather than hanging.
  EXPECT_TRUE(contains(run.err, "fence failed: peer-failed")) << run.err;
  EXPECT_TRUE(contains(run.err, "rank 0 exited with code 0")) << run.err;
}

TEST(IbdtRun, ACrashedRankIsNamedWithItsSignal) {
  CommandResult run = launch({"-n", "4", "--timeout", "60"}, {"segv", "1"});
  EXPECT_EQ(run.exitCode, 128 + 11) << run.err;
  EXPECT_TRUE(contains(run.err, "ibdt-run: rank 1 (pid ")) << run.err;
  EXPECT_TRUE(contains(run.err, "was killed by signal 11 (SIGSEGV")) << run.err;
}

TEST(IbdtRun, AHungJobIsStoppedByTheTimeout) {
  CommandResult run = launch({"-n", "3", "--timeout", "1"}, {"hang", "2"});
  EXPECT_EQ(run.exitCode, 124) << run.err;
  EXPECT_TRUE(contains(run.err, "timed out after 1 s")) << run.err;
  EXPECT_TRUE(contains(run.err, "ranks still running: ")) << run.err;
}

TEST(IbdtRun, ARankIgnoringSigtermIsKilled) {
  CommandResult run = launch({"-n", "3", "--timeout", "60"}, {"stubborn", "0"});
  EXPECT_EQ(run.exitCode, 1) << run.err;
  EXPECT_TRUE(contains(run.err, "rank 1 (pid ")) << run.err;
  EXPECT_TRUE(contains(run.err, "sending SIGKILL")) << run.err;
}

TEST(IbdtRun, GetOfAMissingKeyTimesOutNamingTheRank) {
  CommandResult run = launch({"-n", "2", "--timeout", "60"}, {"missing-key"});
  ASSERT_EQ(run.exitCode, 0) << run.out << run.err;
  EXPECT_TRUE(contains(run.out, "[0] rank 0: timeout: store get: rank 1 did not put 'nobody-puts-this' within"))
      << run.out;
}

TEST(IbdtRun, AStrangerWithoutTheTokenIsRefusedAndTheJobGoesOn) {
  CommandResult run = launch({"-n", "2", "--timeout", "60"}, {"stranger"});
  ASSERT_EQ(run.exitCode, 0) << run.out << run.err;
  EXPECT_TRUE(contains(run.out, "[0] stranger: protocol: connecting to ibdt-run's store: ibdt-run store refused the connection: wrong job token"))
      << run.out;
  EXPECT_TRUE(contains(run.err, "ibdt-run store: refused a connection: wrong job token")) << run.err;
}

// Starts `ibdt-run -n 3 rank_behaviour ready-then-hang` and waits until every
// rank reported its pid. Returns the launcher's pid; its stdout stays in `out`.
pid_t startHangingJob(int& out, std::vector<pid_t>& ranks, std::string* socketPath = nullptr) {
  int pipeFds[2];
  if (::pipe(pipeFds) != 0) return -1;
  pid_t launcher = ::fork();
  if (launcher == 0) {
    ::dup2(pipeFds[1], STDOUT_FILENO);
    ::close(pipeFds[0]);
    ::execl(IBDT_RUN_PATH, IBDT_RUN_PATH, "-n", "3", "--timeout", "60", RANK_BEHAVIOUR_PATH, "ready-then-hang",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(pipeFds[1]);
  out = pipeFds[0];
  std::string output;
  std::regex ready("ready pid=([0-9]+) socket=([^\n]*)\n");
  char chunk[256];
  while (ranks.size() < 3) {
    ssize_t got = ::read(out, chunk, sizeof(chunk));
    if (got <= 0) return -1;
    output.append(chunk, static_cast<size_t>(got));
    ranks.clear();
    for (std::sregex_iterator it(output.begin(), output.end(), ready), end; it != end; ++it) {
      ranks.push_back(static_cast<pid_t>(std::stoi((*it)[1])));
      if (socketPath != nullptr) *socketPath = (*it)[2];
    }
  }
  return launcher;
}

void drainAndClose(int fd) {
  char chunk[256];
  while (::read(fd, chunk, sizeof(chunk)) > 0) {
  }
  ::close(fd);
}

// Gone, or a zombie nobody reaps (a container's init may not).
bool processGone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  size_t close = line.rfind(')');
  return close != std::string::npos && line.size() > close + 2 && line[close + 2] == 'Z';
}

TEST(IbdtRun, InterruptStopsTheWholeJob) {
  int out = -1;
  std::vector<pid_t> ranks;
  pid_t launcher = startHangingJob(out, ranks);
  ASSERT_GT(launcher, 0);
  ASSERT_EQ(::kill(launcher, SIGINT), 0);
  drainAndClose(out);
  int status = 0;
  ASSERT_EQ(::waitpid(launcher, &status, 0), launcher);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGINT);
  // ibdt-run reaped every rank before exiting: none is left.
  for (pid_t rank : ranks) EXPECT_TRUE(processGone(rank)) << "rank pid " << rank << " survived";
}

TEST(IbdtRun, NoRankOutlivesAKilledLauncher) {
  int out = -1;
  std::vector<pid_t> ranks;
  pid_t launcher = startHangingJob(out, ranks);
  ASSERT_GT(launcher, 0);
  ASSERT_EQ(::kill(launcher, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(launcher, &status, 0), launcher);
  drainAndClose(out);
  // The kernel delivers the ranks' parent-death signal asynchronously: wait
  // for it, boundedly.
  for (pid_t rank : ranks) {
    for (int i = 0; i < 1000 && !processGone(rank); ++i) ::usleep(10'000);
    EXPECT_TRUE(processGone(rank)) << "rank pid " << rank << " outlived ibdt-run";
  }
}

bool pathGone(const std::string& path) { return ::access(path.c_str(), F_OK) != 0 && errno == ENOENT; }

// Regression: a launcher killed by SIGKILL left its /tmp directory behind.
TEST(IbdtRun, AKilledLauncherLeavesNoDirectory) {
  int out = -1;
  std::vector<pid_t> ranks;
  std::string socketPath;
  pid_t launcher = startHangingJob(out, ranks, &socketPath);
  ASSERT_GT(launcher, 0);
  ASSERT_FALSE(socketPath.empty());
  std::string directory = socketPath.substr(0, socketPath.rfind('/'));
  ASSERT_FALSE(pathGone(directory));
  ASSERT_EQ(::kill(launcher, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(launcher, &status, 0), launcher);
  drainAndClose(out);
  for (int i = 0; i < 1000 && !pathGone(directory); ++i) ::usleep(10'000);
  EXPECT_TRUE(pathGone(socketPath)) << socketPath;
  EXPECT_TRUE(pathGone(directory)) << directory;
}

TEST(IbdtRun, AnInterruptedLauncherLeavesNoDirectory) {
  int out = -1;
  std::vector<pid_t> ranks;
  std::string socketPath;
  pid_t launcher = startHangingJob(out, ranks, &socketPath);
  ASSERT_GT(launcher, 0);
  std::string directory = socketPath.substr(0, socketPath.rfind('/'));
  ASSERT_EQ(::kill(launcher, SIGTERM), 0);
  drainAndClose(out);
  int status = 0;
  ASSERT_EQ(::waitpid(launcher, &status, 0), launcher);
  EXPECT_TRUE(pathGone(directory)) << directory;  // removed before ibdt-run exited
}

// Every rank fences (no rank 99 exists to exit early), so all hold their
// store connection at once: the launcher needs all its descriptors together.
CommandResult launchUnderLimit(const std::string& ulimit, int ranks) {
  std::string command = "ulimit " + ulimit + " && exec " IBDT_RUN_PATH " -n " + std::to_string(ranks) +
                        " --timeout 60 " RANK_BEHAVIOUR_PATH " exit-code 99 0";
  return runCommand({"sh", "-c", command});
}

rlim_t hardDescriptorLimit() {
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  return limit.rlim_max;
}

// Regression: with a soft limit of 64, ibdt-run never raised it and spun on
// EMFILE until --timeout.
TEST(IbdtRun, ALowSoftDescriptorLimitIsRaisedToTheHardLimit) {
  if (hardDescriptorLimit() < 512) GTEST_SKIP() << "hard descriptor limit below 512";
  CommandResult run = launchUnderLimit("-Sn 64", 22);
  EXPECT_EQ(run.exitCode, 0) << run.err;
  EXPECT_FALSE(contains(run.err, "timed out")) << run.err;
}

// Regression: out of descriptors (hard limit 64), the job hung until
// --timeout with no message.
TEST(IbdtRun, TooFewDescriptorsIsAnErrorNamingTheLimit) {
  CommandResult run = launchUnderLimit("-n 64", 22);
  EXPECT_EQ(run.exitCode, 1) << run.err;
  EXPECT_TRUE(contains(run.err, "-n 22 needs about 82 file descriptors")) << run.err;
  EXPECT_TRUE(contains(run.err, "of the limit 64 are free")) << run.err;
  EXPECT_TRUE(contains(run.err, "--no-prefix")) << run.err;
  EXPECT_FALSE(contains(run.err, "timed out")) << run.err;
}

TEST(IbdtRun, TwoHundredRanksStart) {
  CommandResult run = runCommand({IBDT_RUN_PATH, "-n", "200", "--timeout", "120", RANK_BEHAVIOUR_PATH, "placement"});
  ASSERT_EQ(run.exitCode, 0) << run.err;
  for (int rank = 0; rank < 200; ++rank) {
    std::string r = std::to_string(rank);
    EXPECT_TRUE(contains(run.out, "] rank=" + r + " size=200 ")) << "rank " << r;
  }
}

TEST(IbdtRun, AFailedGtestOnOneRankStopsEveryRank) {
  CommandResult run = runCommand({IBDT_RUN_PATH, "-n", "3", "--timeout", "60", MP_HARNESS_PROBE_PATH});
  EXPECT_NE(run.exitCode, 0);
  EXPECT_TRUE(contains(run.err, "[1] [ibdt-mp] rank 1: ")) << run.err;
  EXPECT_TRUE(contains(run.err, "deliberate failure")) << run.err;
  EXPECT_TRUE(contains(run.err, "MpHarness.FailsOnRankOneOnly failed on rank(s) 1; stopping the job")) << run.err;
  EXPECT_FALSE(contains(run.out, "reached the next test")) << run.out;
}

TEST(IbdtRun, AProgramThatCannotStartIsReported) {
  CommandResult run = runCommand({IBDT_RUN_PATH, "-n", "2", "/nonexistent/program"});
  EXPECT_EQ(run.exitCode, 127) << run.err;
  EXPECT_TRUE(contains(run.err, "cannot execute /nonexistent/program: No such file or directory")) << run.err;
}

TEST(IbdtRun, BadCommandLineIsAUsageError) {
  CommandResult run = runCommand({IBDT_RUN_PATH, "-n", "zero", "true"});
  EXPECT_EQ(run.exitCode, 2);
  EXPECT_TRUE(contains(run.err, "-n expects an integer")) << run.err;
  EXPECT_TRUE(contains(run.err, "usage: ibdt-run")) << run.err;
}

}  // namespace
}  // namespace ibdt::test
