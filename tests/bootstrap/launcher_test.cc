// ibdt-run end to end: output forwarding and every way a job can go wrong.
// Each case launches the real ibdt-run with tests/bootstrap/rank_behaviour.
#include <gtest/gtest.h>

#include <string>

#include "bootstrap/run_command.h"

namespace ibdt::test {
namespace {

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
