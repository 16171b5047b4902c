// ibdt-bench bootstrap — launch to "all endpoint blobs exchanged".
//
// Starts ibdt-launch-check as 4 and 8 ranks under every launcher found
// (ibdt-run, Open MPI's mpirun with PMIx, MPICH's mpiexec with PMI-1), each
// measured in the same run. Per launch it records the time from starting
// the launcher to the slowest rank holding every peer's blob, the part of it
// spent after the rank's main() began (joining the store, put, fence, gets),
// and the whole launch until the launcher exited.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <regex>

#include "bootstrap/launcher/run_command.h"
#include "ibdt/status.h"
#include "perf/benchmarks.h"

namespace ibdt::perf {
namespace {

struct Launcher {
  std::string name;
  std::vector<std::string> prefix;  // the command and options before "-n N"
  std::vector<std::string> environment;
};

std::filesystem::path binDirectory() {
  std::error_code error;
  auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::filesystem::path(".") : self.parent_path();
}

bool onPath(const std::string& program) {
  return bootstrap::runCommand({"sh", "-c", "command -v " + program}).exitCode == 0;
}

std::vector<std::string> argvFor(const Launcher& launcher, int ranks) {
  std::vector<std::string> argv = launcher.prefix;
  argv.push_back("-n");
  argv.push_back(std::to_string(ranks));
  if (launcher.name == "ibdt-run") argv.push_back("--");
  return argv;
}

int64_t wallClockNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::optional<double> field(const std::string& text, const std::string& name) {
  std::smatch match;
  if (!std::regex_search(text, match, std::regex(name + "=([0-9.]+)"))) return std::nullopt;
  return std::stod(match[1]);
}

void run(const CommonOptions& common) {
  std::filesystem::path bin = binDirectory();
  std::string check = (bin / "ibdt-launch-check").string();
  std::vector<Launcher> launchers{{"ibdt-run", {(bin / "ibdt-run").string()}, {}}};
  if (onPath("mpirun.openmpi")) {
    launchers.push_back({"mpirun (Open MPI, PMIx)",
                         {"mpirun.openmpi", "--oversubscribe"},
                         {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"}});
  }
  if (onPath("mpiexec.mpich")) launchers.push_back({"mpiexec (MPICH Hydra, PMI-1)", {"mpiexec.mpich"}, {}});

  int reps = common.quick ? 3 : common.reps;
  int warmup = common.quick ? 1 : common.warmup;
  Report report("bootstrap: launch to all endpoint blobs exchanged (ms; median [min, max])",
                {"launcher", "ranks", "launch_to_exchanged", "min", "max", "in_process", "whole_launch"});
  for (const Launcher& launcher : launchers) {
    for (int ranks : {4, 8}) {
      std::vector<double> toExchanged, inProcess, whole;
      for (int i = 0; i < warmup + reps; ++i) {
        std::vector<std::string> argv = argvFor(launcher, ranks);
        int64_t launchedAt = wallClockNanos();
        argv.insert(argv.end(), {check, "--expect-size", std::to_string(ranks), "--launched-at",
                                 std::to_string(launchedAt)});
        bootstrap::CommandResult result = bootstrap::runCommand(argv, launcher.environment);
        auto launchMs = field(result.out, "launch_to_exchanged_ms");
        auto joinMs = field(result.out, "join_to_exchanged_ms");
        if (result.exitCode != 0 || !launchMs || !joinMs) {
          reportFailure(strCat(launcher.name, " -n ", ranks, " failed (exit ", result.exitCode, "): ", result.out,
                               result.err));
          break;
        }
        if (i < warmup) continue;
        toExchanged.push_back(*launchMs);
        inProcess.push_back(*joinMs);
        whole.push_back(result.seconds * 1e3);
      }
      if (toExchanged.empty()) continue;
      Summary launch = summarize(toExchanged);
      report.add({{"launcher", launcher.name},
                  {"ranks", ranks},
                  {"launch_to_exchanged", launch.median},
                  {"min", launch.min},
                  {"max", launch.max},
                  {"in_process", summarize(inProcess).median},
                  {"whole_launch", summarize(whole).median}});
    }
  }
  report.note("repetitions", reps);
  report.note("in_process", "from the slowest rank's main() to all blobs verified: connect, put, commit, fence, get");
  report.note("whole_launch", "from starting the launcher to its exit");
  report.print(common);
}

}  // namespace

void addBootstrapBenchmark(CLI::App& app, const CommonOptions& common) {
  app.add_subcommand("bootstrap", "launch to all endpoint blobs exchanged, 4 and 8 ranks, under each launcher")
      ->callback([&common] { run(common); });
}

}  // namespace ibdt::perf
