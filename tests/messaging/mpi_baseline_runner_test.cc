// perf/mpi_baseline_runner: how ibdt-bench runs its MPI baseline programs and
// what it reports when they fail. /bin/sh stands in for a baseline program
// (ranks == 1 runs the program directly, as for the MPI_Pack singleton).
#include "perf/mpi_baseline_runner.h"

#include <gtest/gtest.h>

namespace ibdt::perf {
namespace {

MpiLibrary fakeLibrary(std::string label = "ompi", std::string launcher = "") {
  return {"Fake MPI", std::move(label), std::move(launcher), "", "", ""};
}

Result<std::vector<nlohmann::json>> runShell(const std::string& script, int seconds = 60) {
  return runMpiBaseline(fakeLibrary(), "/bin/sh", 1, {"-c", script}, std::chrono::seconds(seconds));
}

TEST(MpiBaselineRunner, ReturnsTheJsonLinesAndSkipsLauncherChatter) {
  auto lines = runShell(R"(echo 'Warning: some launcher chatter'
echo '{"row": "vector", "x": 16, "round_trip": [1.5e-06, 1e-06, 2e-06]}'
echo '{not json'
echo 'more chatter' >&2
echo '{"row": "contig", "x": 2048}')");
  ASSERT_TRUE(lines.isOk()) << lines.status().toString();
  ASSERT_EQ(lines->size(), 2u);
  EXPECT_EQ((*lines)[0]["row"], "vector");
  EXPECT_EQ((*lines)[0]["x"], 16);
  EXPECT_DOUBLE_EQ((*lines)[0]["round_trip"][0].get<double>(), 1.5e-06);
  EXPECT_DOUBLE_EQ((*lines)[0]["round_trip"][2].get<double>(), 2e-06);
  EXPECT_EQ((*lines)[1]["row"], "contig");
  EXPECT_EQ((*lines)[1]["x"], 2048);
}

TEST(MpiBaselineRunner, NonZeroExitIsAnErrorNamingTheStatusAndStderr) {
  auto lines = runShell("echo '{\"row\": \"vector\"}'; echo 'MPI_Init failed: no shm' >&2; exit 3");
  ASSERT_FALSE(lines.isOk());
  const std::string text = lines.status().toString();
  EXPECT_NE(text.find("exit status 3"), std::string::npos) << text;
  EXPECT_NE(text.find("MPI_Init failed: no shm"), std::string::npos) << text;
  EXPECT_NE(text.find("/bin/sh"), std::string::npos) << text;  // the command
}

TEST(MpiBaselineRunner, AnErrorLineIsAnErrorEvenWithExitZero) {
  auto lines = runShell(R"(echo '{"error": "x=16: int at row 3, column 2 is 7, expected 9"}'; exit 0)");
  ASSERT_FALSE(lines.isOk());
  EXPECT_NE(lines.status().toString().find("int at row 3, column 2 is 7"), std::string::npos)
      << lines.status().toString();
}

TEST(MpiBaselineRunner, AProgramThatCannotStartIsAnError) {
  auto lines = runMpiBaseline(fakeLibrary(), "/nonexistent/ibdt-mpi-vector", 1, {}, std::chrono::seconds(60));
  ASSERT_FALSE(lines.isOk());
  EXPECT_NE(lines.status().toString().find("exit status 127"), std::string::npos) << lines.status().toString();
}

TEST(MpiBaselineRunner, AHungProgramIsStoppedWithItsChildren) {
  // The shell's child (sleep) holds the pipes too: the whole group must go.
  auto lines = runShell("echo '{\"row\": \"vector\"}'; sleep 600 & wait", 1);
  ASSERT_FALSE(lines.isOk());
  EXPECT_NE(lines.status().toString().find("no end after 1 s"), std::string::npos) << lines.status().toString();
}

TEST(MpiBaselineRunner, AProgramThatClosesItsOutputAndHangsIsStopped) {
  auto lines = runShell("exec >&- 2>&-; sleep 600", 1);
  ASSERT_FALSE(lines.isOk());
  EXPECT_NE(lines.status().toString().find("no end after 1 s"), std::string::npos) << lines.status().toString();
}

TEST(MpiBaselineRunner, SeveralRanksNeedALauncher) {
  auto lines = runMpiBaseline(fakeLibrary("mpich", ""), "/bin/true", 2, {}, std::chrono::seconds(60));
  ASSERT_FALSE(lines.isOk());
  EXPECT_EQ(lines.status().code(), Code::kUnsupported);
}

TEST(MpiBaselineRunner, LaunchersGetTheirOwnOptions) {
  EXPECT_EQ(mpiLaunchDescription(fakeLibrary("ompi", "/usr/bin/mpirun.openmpi"), 2),
            "/usr/bin/mpirun.openmpi -n 2 --oversubscribe");
  EXPECT_EQ(mpiLaunchDescription(fakeLibrary("ompi", "/usr/bin/mpirun.openmpi"), 1), "");
  const std::string mpich = mpiLaunchDescription(fakeLibrary("mpich", "/usr/bin/mpiexec.mpich"), 2);
  EXPECT_EQ(mpich.rfind("/usr/bin/mpiexec.mpich -n 2", 0), 0u) << mpich;
}

}  // namespace
}  // namespace ibdt::perf
