// ibdt-tune — measures this machine's message paths and writes the tuning
// file that contexts load (docs/tuning.md). Two forked ranks time every path
// end to end over the chosen provider (a few seconds); the fits go to
// IBDT_TUNE_FILE's path, or --output.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "base/config.h"
#include "perf/benchmarks.h"
#include "perf/forked_ranks.h"
#include "collectives/alltoall_select.h"
#include "tools/tune_alltoall.h"
#include "tools/tune_measure.h"
#include "transport/messaging/tuned_select.h"
#include "transport/messaging/tuning.h"

namespace ibdt::perf {
// perf/forked_ranks.cc reports a rank's failure through this.
void reportFailure(const std::string& what) { std::fprintf(stderr, "ibdt-tune: %s\n", what.c_str()); }
}  // namespace ibdt::perf

namespace {

using namespace ibdt;
using messaging::TunedPath;

struct TuneOptions {
  std::string provider = "shm";
  std::string output;  // empty: IBDT_TUNE_FILE (auto: the per-host default path)
  int reps = 15;
  int rounds = 5;
  // The largest rank count of `ibdt-bench alltoall` (2, 4, 8): its choices
  // come from timings, not from the fit (docs/alltoall-selection.md).
  int alltoallRanks = 16;  // 0: no collective timings (a format_version 1 file)
};

Result<messaging::Tuning> fit(const tune::Measured& measured, const std::string& provider) {
  messaging::Tuning tuning;
  tuning.key = messaging::currentHostKey(provider);
  tuning.minBytes = measured.minBytes;
  tuning.maxBytes = measured.maxBytes;
  tuning.rounds = measured.rounds;
  for (int p = 0; p < messaging::kTunedPathCount; ++p) {
    const auto& samples = measured.samples[static_cast<size_t>(p)];
    if (samples.empty()) continue;
    auto path = static_cast<TunedPath>(p);
    bool contiguous = path == TunedPath::kContig || path == TunedPath::kPipelinedContig;
    auto cost = messaging::fitPathCost(samples, !contiguous);
    if (!cost.isOk()) return std::move(cost).takeStatus().withContext(messaging::tunedPathName(path));
    tuning.cost(path) = *cost;
  }
  return tuning;
}

// Whether the rounds agreed on the fastest path of each layout.
void printRounds(const messaging::TuningRounds& rounds) {
  std::printf("\n%lld rounds: they agree on the fastest path at %lld of %lld layouts\n",
              static_cast<long long>(rounds.count),
              static_cast<long long>(rounds.layouts - static_cast<int64_t>(rounds.disagreements.size())),
              static_cast<long long>(rounds.layouts));
  for (const messaging::RoundDisagreement& d : rounds.disagreements) {
    std::printf("  %.0f bytes in %.0f blocks: %s over all rounds, but %s took %.2f of its time in one round\n",
                d.bytes, d.blocks, std::string(messaging::tunedPathName(d.chosen)).c_str(),
                std::string(messaging::tunedPathName(d.roundWinner)).c_str(), d.ratio);
  }
}

// The fits, and what they choose for the paper's vector (128 rows of x ints).
void printTuning(const messaging::Tuning& tuning, const tune::Measured& measured, bool rdmaRead) {
  std::printf("%-17s %14s %12s %13s   measured / fitted (us)\n", "path", "per message ns", "per byte ns",
              "per block ns");
  for (int p = 0; p < messaging::kTunedPathCount; ++p) {
    const messaging::PathCost& cost = tuning.paths[static_cast<size_t>(p)];
    if (!cost.measured) continue;
    std::printf("%-17s %14.0f %12.4f %13.2f  ",
                std::string(messaging::tunedPathName(static_cast<TunedPath>(p))).c_str(), cost.perMessageNs,
                cost.perByteNs, cost.perBlockNs);
    for (const auto& s : measured.samples[static_cast<size_t>(p)]) {
      std::printf(" %.0f/%.0f", s.ns / 1e3, cost.ns(s.bytes, s.blocks) / 1e3);
    }
    std::printf("\n");
  }
  // As a Context with the default eager limit and credits decides
  // (protocol_select.cc: pipelined up to half the credit window).
  messaging::Options defaults;
  const int64_t pipelinedUpTo =
      std::min<int64_t>(tuning.maxBytes, static_cast<int64_t>(defaults.eagerCredits) * defaults.eagerLimit / 2);
  printRounds(tuning.rounds);
  std::printf("\nchoice for vector(128, x, 4096, int), default eager limit and credits:");
  for (int64_t x = 64; x <= 2048; x *= 2) {
    messaging::SideLayout side{128 * x * 4, false, 128, static_cast<double>(x * 4)};
    bool pipelined = side.bytes <= pipelinedUpTo;
    const char* choice = side.bytes <= defaults.eagerLimit
                             ? "eager"
                             : std::string_view(messaging::tunedPathName(
                                                    messaging::bestTunedPath(tuning, side, side, rdmaRead, pipelined)))
                                   .data();
    std::printf(" x=%lld %s", static_cast<long long>(x), choice);
  }
  std::printf("\n");
}

// One fit and its samples: measured / fitted.
void printCollectiveFit(const messaging::Tuning& tuning, const std::string& name,
                        const std::vector<messaging::TuningSample>& samples) {
  for (const messaging::CollectiveFit& fit : tuning.collectives) {
    if (fit.name != name) continue;
    std::printf("%-30s %10.0f %15.0f %12.4f  ", name.c_str(), fit.cost.fixedNs, fit.cost.perMessageNs,
                fit.cost.perByteNs);
    for (const auto& s : samples) std::printf(" %.1f/%.1f", s.ns / 1e3, fit.cost.ns(s.blocks, s.bytes) / 1e3);
    std::printf("\n");
  }
}

// The alltoall fits, their samples, and what kAuto chooses with them.
void printAlltoalls(const messaging::Tuning& tuning, const tune::AlltoallMeasured& measured) {
  std::string counts;
  for (int p : tune::alltoallRankCounts(measured.maxRanks)) counts += (counts.empty() ? "" : ",") + std::to_string(p);
  std::printf("\n%-30s %10s %15s %12s   measured / fitted (us), p = %s\n", "alltoall algorithm", "fixed ns",
              "per message ns", "per byte ns", counts.c_str());
  for (const tune::AlltoallSamples& algorithm : measured.algorithms) {
    printCollectiveFit(tuning, algorithm.fitName, algorithm.samples);
    printCollectiveFit(tuning, algorithm.initFitName, algorithm.initSamples);
  }
  const auto model = collectives::AlltoallCostModel::fromTuning(&tuning);
  for (bool perCall : {false, true}) {
    std::printf("\nalltoall auto, %s (up to %d ranks: the timings between the sizes timed, else the fit; beyond: the fit anchored at the last timing):\n",
                perCall ? "blocking (run + init)" : "persistent", measured.maxRanks);
    // One node, then kTunedNodes nodes (where the hierarchical alltoall competes).
    for (int nodes : {1, collectives::kTunedNodes}) {
      for (int p : {2, 3, 4, 8, 16, 64, 256}) {
        std::printf("  p=%-4d%s", p, nodes > 1 ? (" on " + std::to_string(nodes) + " nodes").c_str() : "");
        for (int64_t bytes : {8, 64, 512, 4096, 65536}) {
          const auto choice = collectives::selectAlltoall(model, p, bytes, true, nodes, perCall);
          std::string name(collectives::alltoallAlgorithmName(choice.algorithm));
          if (choice.algorithm == collectives::AlltoallAlgorithm::kBruckRadix) name += "-" + std::to_string(choice.radix);
          std::printf(" %lldB:%s", static_cast<long long>(bytes), name.c_str());
        }
        std::printf("\n");
      }
    }
  }
}

int run(const TuneOptions& options) {
  std::string path = options.output;
  if (path.empty()) {
    auto setting = config::getString("IBDT_TUNE_FILE");
    if (!setting.isOk()) return std::fprintf(stderr, "ibdt-tune: %s\n", setting.status().toString().c_str()), 1;
    if (*setting == messaging::kTuneFileOff)
      return std::fprintf(stderr, "ibdt-tune: IBDT_TUNE_FILE=off and no --output\n"), 1;
    path = *setting == messaging::kTuneFileAuto
               ? messaging::defaultTuneFilePath(messaging::currentHostKey(options.provider))
               : *setting;
  }
  auto start = std::chrono::steady_clock::now();
  const std::string jobTag = "ibdt-tune-" + std::to_string(getpid());
  tune::Measured measured;
  bool rdmaRead = false;
  bool ok = perf::runForkedRanks("ibdt-tune", 2, [&](messaging::Bootstrap& bootstrap) -> Status {
    IBDT_ASSIGN_OR_RETURN(auto domain, fabric::openDomain(options.provider, {jobTag, ""}));
    rdmaRead = domain->caps().rdmaRead;
    IBDT_ASSIGN_OR_RETURN(measured, tune::measurePaths(*domain, bootstrap, {.reps = options.reps, .rounds = options.rounds}));
    return Status::ok();
  });
  if (!ok) return 1;
  auto tuning = fit(measured, options.provider);
  if (!tuning.isOk()) return std::fprintf(stderr, "ibdt-tune: %s\n", tuning.status().toString().c_str()), 1;
  printTuning(*tuning, measured, rdmaRead);
  if (options.alltoallRanks >= 2) {
    // The point-to-point fits first, in force while the alltoalls are timed.
    Status pointToPoint = messaging::writeTuningFile(path, *tuning);
    if (!pointToPoint.isOk()) return std::fprintf(stderr, "ibdt-tune: %s\n", pointToPoint.toString().c_str()), 1;
    auto alltoalls = tune::measureAlltoalls({options.provider, options.alltoallRanks, options.reps, path});
    Status fitted = alltoalls.isOk() ? tune::fitAlltoalls(*alltoalls, *tuning) : alltoalls.status();
    if (!fitted.isOk()) return std::fprintf(stderr, "ibdt-tune: %s\n", fitted.toString().c_str()), 1;
    printAlltoalls(*tuning, *alltoalls);
  }
  Status written = messaging::writeTuningFile(path, *tuning);
  if (!written.isOk()) return std::fprintf(stderr, "ibdt-tune: %s\n", written.toString().c_str()), 1;
  std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  std::printf("\nwrote %s (%s; measured in %.1f s)\n", path.c_str(), tuning->key.fileStem().c_str(), took.count());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app(
      "ibdt-tune: time this machine's message paths and write the tuning file contexts load "
      "(docs/tuning.md)");
  TuneOptions options;
  app.add_option("--provider", options.provider, "fabric provider to measure (shm, verbs)");
  app.add_option("--output", options.output, "file to write (default: IBDT_TUNE_FILE, auto: the per-host cache path)");
  app.add_option("--reps", options.reps, "timed ping-pongs per path and layout, split among the rounds")
      ->check(CLI::Range(3, 1000));
  app.add_option("--rounds", options.rounds,
                 "rounds over every path and layout, the paths taking turns; paths are compared within each "
                 "round and the median ratio kept (docs/tuning.md, \"Rounds\")")
      ->check(CLI::Range(1, 100));
  app.add_option("--alltoall-ranks", options.alltoallRanks,
                 "time the alltoall algorithms for kAuto's selection at 2..8 forked ranks, then 16, 32, 64 "
                 "up to N, and N (0: not; N >= 3, since one rank count cannot separate a call's fixed cost "
                 "from its cost per message)")
      ->check(CLI::Range(0, 64))
      ->check(CLI::Validator(
          [](const std::string& value) -> std::string {
            return value == "1" || value == "2" ? "at least 3 ranks: two rank counts separate a call's fixed cost from "
                                                  "its cost per message (0 skips the alltoall timings)"
                                                : "";
          },
          "0 or 3..64"));
  CLI11_PARSE(app, argc, argv);
  return run(options);
}
