// ibdt-bench soak — the soak over real processes (issue 17,
// docs/security.md "Soak"): N forked ranks over the default provider (shm
// on one host) run random mixes of point-to-point messages of random
// derived types, alltoall, alltoallv and barrier (tests/support/
// soak_round.h), every received byte checked against what its sender meant.
//   mix:    one job per rank count for --seconds; reports rounds and bytes
//           checked (and per minute); any wrong byte or error fails.
//   --kill: --jobs jobs per rank count; in each, once every rank runs its
//           rounds (--during-create: from the fork on), --victims random
//           ranks are SIGKILLed, each after its own random delay. Every
//           survivor must end its rounds with an error that is not a
//           timeout, with no wrong byte, and exit within 2 x --bound;
//           otherwise the bench fails.
// Not a speed benchmark: rounds vary with the random sizes and the load.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "datatype/reference.h"
#include "perf/benchmarks.h"
#include "perf/process_exit.h"
#include "perf/soak_job.h"

namespace ibdt::perf {
namespace {

struct SoakOptions {
  std::vector<int> ranks;  // empty: 4
  double seconds = 10;
  bool kill = false;
  int jobs = 4;
  int delayMs = 300;  // kill: each victim dies 0..delayMs after every rank started its rounds
  int victims = 1;    // kill: ranks SIGKILLed per job (fewer than the ranks)
  bool duringCreate = false;  // kill: 0..delayMs after the fork, while ranks create their contexts
  int boundSeconds = 30;
  uint64_t seed = 0x50a4;
  std::string provider = "auto";
};

std::string tag(const char* what, int ranks, int job) { return strCat("soak-", what, "-", getpid(), "-", ranks, "-", job); }

// Every way a rank's end breaks the soak's rules, "" when none does.
std::string complaint(const SoakRankEnd& end, bool survivorOfKill) {
  if (end.hung) return "hung (killed by the bench at 2 x --bound)";
  if (!WIFEXITED(end.waitStatus) || WEXITSTATUS(end.waitStatus) != 0) return describeExit(end.waitStatus);
  if (!end.roundsEnded) return "ended without a word";
  if (end.wrong) return "wrong data: " + end.message;
  if (!survivorOfKill) return end.code == Code::kOk ? "" : end.message;
  if (end.code == Code::kOk) return "reported success although a rank was killed";
  if (end.code == Code::kTimeout) return "timed out instead of noticing the dead rank: " + end.message;
  return "";
}

void runMix(const SoakOptions& options, int ranks, Report& report, std::string& provider) {
  SoakJobSpec spec;
  spec.ranks = ranks;
  spec.provider = options.provider;
  spec.seed = options.seed;
  spec.mixFor = std::chrono::milliseconds(static_cast<int64_t>(options.seconds * 1000));
  spec.bound = std::chrono::seconds(options.boundSeconds);
  auto job = runSoakJob(spec, tag("mix", ranks, 0));
  if (!job.isOk()) return reportFailure("soak: " + job.status().toString());
  provider = job->ranks[0].provider;
  int64_t bytes = 0;
  int failures = 0;
  for (size_t r = 0; r < job->ranks.size(); ++r) {
    bytes += job->ranks[r].bytesChecked;
    if (std::string why = complaint(job->ranks[r], false); !why.empty()) {
      reportFailure(strCat("soak at ", ranks, " ranks: rank ", r, ": ", why));
      ++failures;
    }
  }
  const uint64_t rounds = job->ranks[0].rounds;
  const double minutes = options.seconds / 60;
  report.add({{"ranks", ranks}, {"seconds", options.seconds}, {"rounds", rounds}, {"bytes checked", bytes},
              {"rounds/min", static_cast<double>(rounds) / minutes},
              {"MB checked/min", static_cast<double>(bytes) / 1e6 / minutes}, {"failed ranks", failures}});
}

// The job's victims: distinct ranks, each with its own delay, from the seed.
std::vector<SoakJobSpec::Victim> pickVictims(const SoakOptions& options, int ranks, uint64_t seed) {
  datatype::testing::TypeGenerator pick(seed);
  std::vector<int> order(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) order[static_cast<size_t>(r)] = r;
  for (int i = ranks - 1; i > 0; --i) std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(pick.uniform(0, i))]);
  std::vector<SoakJobSpec::Victim> victims;
  for (int i = 0; i < std::min(options.victims, ranks - 1); ++i) {
    victims.push_back({order[static_cast<size_t>(i)], std::chrono::milliseconds(pick.uniform(0, options.delayMs))});
  }
  return victims;
}

std::string listOf(const std::vector<SoakJobSpec::Victim>& victims, bool delays) {
  std::string text;
  for (const auto& victim : victims) {
    text += strCat(text.empty() ? "" : ",", delays ? victim.delay.count() : static_cast<int64_t>(victim.rank));
  }
  return text;
}

// A victim dies of its SIGKILL, outside its rounds' end; a later victim may
// instead have ended first with the error the earlier death caused, and
// then exited or met its own SIGKILL on the way out (closing its context).
bool victimEndedAsMeant(const SoakRankEnd& end, bool first) {
  const bool killed = WIFSIGNALED(end.waitStatus) && WTERMSIG(end.waitStatus) == SIGKILL;
  if (killed && !end.roundsEnded) return true;
  if (first) return false;
  if (killed && !end.hung && !end.wrong) return end.code != Code::kOk && end.code != Code::kTimeout;
  return complaint(end, true).empty();
}

// One kill job's row; its victims and delays come from the job's seed.
void runKillJob(const SoakOptions& options, int ranks, int job, Report& report, std::map<std::string, int>& codes,
                std::string& provider) {
  SoakJobSpec spec;
  spec.ranks = ranks;
  spec.provider = options.provider;
  spec.seed = options.seed * 31 + static_cast<uint64_t>(job) * 1000003 + static_cast<uint64_t>(ranks);
  spec.kill = true;
  spec.victims = pickVictims(options, ranks, spec.seed);
  spec.duringCreate = options.duringCreate;
  spec.bound = std::chrono::seconds(options.boundSeconds);
  auto result = runSoakJob(spec, tag("kill", ranks, job));
  if (!result.isOk()) return reportFailure("soak --kill: " + result.status().toString());
  auto isVictim = [&](int r) {
    return std::any_of(spec.victims.begin(), spec.victims.end(), [r](const auto& v) { return v.rank == r; });
  };
  for (int r = 0; r < ranks && provider.empty(); ++r) {
    if (!isVictim(r)) provider = result->ranks[static_cast<size_t>(r)].provider;
  }
  const int firstVictim = std::min_element(spec.victims.begin(), spec.victims.end(), [](const auto& a, const auto& b) {
                            return a.delay < b.delay;
                          })->rank;
  int errors = 0, failures = 0;
  uint64_t rounds = 0;
  int64_t bytes = 0;
  double slowest = 0;
  const std::string what = strCat("soak --kill at ", ranks, " ranks, job ", job, " (ranks ", listOf(spec.victims, false),
                                  " killed after ", listOf(spec.victims, true), " ms",
                                  spec.duringCreate ? " from the fork" : "", ")");
  for (int r = 0; r < ranks; ++r) {
    const SoakRankEnd& end = result->ranks[static_cast<size_t>(r)];
    if (isVictim(r)) {
      if (victimEndedAsMeant(end, r == firstVictim)) continue;
      reportFailure(strCat(what, ": victim rank ", r, " was not killed in its rounds (", describeExit(end.waitStatus),
                           ") ", end.message));
      ++failures;
      continue;
    }
    rounds = std::max(rounds, end.rounds);
    bytes += end.bytesChecked;
    slowest = std::max(slowest, end.secondsAfterKill);
    if (end.roundsEnded && end.code != Code::kOk) ++errors, ++codes[std::string(codeName(end.code))];
    if (std::string why = complaint(end, true); !why.empty()) {
      reportFailure(strCat(what, ": rank ", r, ": ", why));
      ++failures;
    }
  }
  const int survivors = ranks - static_cast<int>(spec.victims.size());
  report.add({{"ranks", ranks}, {"job", job}, {"victims", listOf(spec.victims, false)},
              {"kill after ms", listOf(spec.victims, true)}, {"rounds", rounds}, {"bytes checked", bytes},
              {"survivors", survivors}, {"errors", errors}, {"failed ranks", failures}, {"s to last exit", slowest}});
}

void runSoak(const SoakOptions& options, const CommonOptions& common) {
  const std::vector<int> rankCounts = options.ranks.empty() ? std::vector<int>{4} : options.ranks;
  Report report = options.kill
                      ? Report(strCat("soak --kill: ", options.victims, " random rank(s) SIGKILLed at random points ",
                                      options.duringCreate ? "while the ranks create their contexts" : "in the rounds",
                                      "; survivors must end with an error, never a timeout, a hang or a wrong byte"),
                               {"ranks", "job", "victims", "kill after ms", "rounds", "bytes checked", "survivors",
                                "errors", "failed ranks", "s to last exit"})
                      : Report("soak: random point-to-point (random derived types) and collectives, every byte checked",
                               {"ranks", "seconds", "rounds", "bytes checked", "rounds/min", "MB checked/min",
                                "failed ranks"});
  std::map<std::string, int> codes;
  std::string provider;  // the one the ranks opened
  for (int ranks : rankCounts) {
    for (int job = 0; options.kill && job < options.jobs; ++job) {
      runKillJob(options, ranks, job, report, codes, provider);
    }
    if (!options.kill) runMix(options, ranks, report, provider);
  }
  report.setFileStem(options.kill ? "soak-kill" : "soak");
  report.note("machine", machineDescription());
  report.note("provider", options.provider == provider ? provider : strCat(options.provider, ": ", provider));
  report.note("seed", options.seed);
  report.note("limits", "eager limit 256 B, 4 credits, 1000-byte segments (every size crosses the protocols)");
  if (options.kill) {
    nlohmann::json seen = nlohmann::json::object();
    for (const auto& [code, count] : codes) seen[code] = count;
    report.note("survivor errors by code", seen);
    report.note("bound", strCat("each wait ", options.boundSeconds, " s; a rank alive ", 2 * options.boundSeconds,
                                " s after the kill is hung"));
  }
  report.print(common);
}

}  // namespace

void addSoakBenchmark(CLI::App& app, const CommonOptions& common) {
  auto options = std::make_shared<SoakOptions>();
  CLI::App* sub = app.add_subcommand("soak", "random messages and collectives among forked ranks, every byte checked; "
                                             "--kill: a rank is SIGKILLed and the others must fail cleanly");
  sub->fallthrough();
  sub->add_option("--ranks", options->ranks, "rank counts (default 4)")->check(CLI::Range(2, 8));
  sub->add_option("--seconds", options->seconds, "mix: time per rank count (default 10)")
      ->check(CLI::Range(0.1, 86400.0));
  sub->add_flag("--kill", options->kill, "kill mode: SIGKILL a random rank in each job");
  sub->add_option("--jobs", options->jobs, "kill mode: jobs per rank count (default 4)")->check(CLI::Range(1, 100000));
  sub->add_option("--kill-delay-ms", options->delayMs, "kill mode: the kill comes 0..this after the rounds start "
                                                       "(default 300)")->check(CLI::Range(0, 600000));
  sub->add_option("--victims", options->victims, "kill mode: ranks killed per job, each at its own delay (default 1; "
                                                 "at most ranks - 1)")->check(CLI::Range(1, 7));
  sub->add_flag("--during-create", options->duringCreate, "kill mode: the kills come 0..--kill-delay-ms after the fork, "
                                                          "while the ranks open, connect and create");
  sub->add_option("--bound", options->boundSeconds, "seconds each wait may take (default 30)")->check(CLI::Range(1, 3600));
  sub->add_option("--seed", options->seed, "the rounds' seed");
  sub->add_option("--provider", options->provider, "fabric provider (auto, shm, verbs)");
  sub->callback([options, &common] { runSoak(*options, common); });
}

}  // namespace ibdt::perf
