// ibdt-sim: predicted all-to-all times at scales this machine cannot run
// (docs/simulator.md). Every algorithm's schedule (alltoall_schedule.h) is
// replayed in SimGrid for each rank count and block size, with the on-node
// costs of this machine's fit (the tuning file, else the built-in model of
// alltoall_select.cc); the table shows the best algorithm, what kAuto would
// pick and the ratio of their simulated times. `--write-rules FILE` writes
// the tuning file the costs came from with the simulated times as the
// selection's rules (collectives/alltoall_rules.h).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "collectives/alltoall_select.h"
#include "perf/report.h"
#include "tools/sim/sim_rules.h"
#include "tools/sim/sim_run.h"
#include "transport/messaging/tuning.h"

namespace {

using ibdt::collectives::AlltoallAlgorithm;
using ibdt::collectives::AlltoallCostModel;
using ibdt::collectives::AlltoallChoice;

struct Options {
  std::vector<int> ranks = {4, 16, 64, 256, 1024};
  int ranksPerNode = 16;
  std::vector<int64_t> blockSizes = {8, 64, 512, 4096, 32768};
  std::vector<std::string> algorithms = {"pairwise",        "bruck-basic", "bruck-modified",
                                         "bruck-zero-copy", "bruck-radix", "hierarchical"};
  std::vector<int64_t> radixes = {3, 4, 8};
  int leaders = 1;
  int64_t throttle = 0;
  std::string platform = "fat-tree";
  int cores = 2;  // one-node: this machine's
  std::string tuneFile = "auto";
  std::string writeRules;  // "": none
  std::vector<std::string> config;
  ibdt::sim::PlatformSpec spec;
  ibdt::perf::CommonOptions common;
};

// An algorithm as simulated: bruck-radix once per radix.
struct Variant {
  AlltoallAlgorithm algorithm;
  int64_t radix;
  std::string name;
};

ibdt::Result<std::vector<Variant>> variants(const Options& options) {
  std::vector<Variant> out;
  for (const std::string& name : options.algorithms) {
    IBDT_ASSIGN_OR_RETURN(AlltoallAlgorithm algorithm, ibdt::collectives::parseAlltoallAlgorithm(name));
    if (algorithm == AlltoallAlgorithm::kAuto) {
      return ibdt::makeError(ibdt::Code::kInvalidArgument, "--algorithms: auto is the selection, not an algorithm");
    }
    if (algorithm != AlltoallAlgorithm::kBruckRadix) {
      out.push_back({algorithm, 2, name});
      continue;
    }
    for (int64_t radix : options.radixes) {
      if (radix < 2) return ibdt::makeError(ibdt::Code::kInvalidArgument, "--radixes: ", radix, " (must be >= 2)");
      out.push_back({algorithm, radix, AlltoallChoice{algorithm, radix}.name()});
    }
  }
  return out;
}


// On-node cost of a variant: its fit; hierarchical (whose fit prices a call) sends
// packed direct messages, so it takes pairwise's.
ibdt::messaging::CollectiveCost onNodeCost(const AlltoallCostModel& model, AlltoallAlgorithm algorithm) {
  if (algorithm == AlltoallAlgorithm::kHierarchical) algorithm = AlltoallAlgorithm::kPairwise;
  const ibdt::messaging::CollectiveCost* cost = model.cost(algorithm);
  if (cost == nullptr) cost = model.cost(AlltoallAlgorithm::kPairwise);
  return cost != nullptr ? *cost : ibdt::messaging::CollectiveCost{};
}

struct Grid {
  std::vector<ibdt::sim::SimCase> cases;
  std::vector<std::pair<size_t, size_t>> where;  // (variant, point) per case
  std::vector<std::pair<int, int64_t>> points;   // (p, b)
};

Grid makeGrid(const Options& options, const std::vector<Variant>& list, const AlltoallCostModel& model) {
  Grid grid;
  for (int p : options.ranks) {
    for (int64_t b : options.blockSizes) grid.points.emplace_back(p, b);
  }
  for (size_t point = 0; point < grid.points.size(); ++point) {
    for (size_t v = 0; v < list.size(); ++v) {
      ibdt::sim::SimCase simCase;
      simCase.algorithm = list[v].algorithm;
      simCase.shape.ranks = grid.points[point].first;
      simCase.shape.blockBytes = grid.points[point].second;
      simCase.shape.radix = list[v].radix;
      simCase.shape.throttle = options.throttle;
      simCase.shape.leaders = options.leaders;
      simCase.shape.ranksPerNode = options.platform == "one-node" ? simCase.shape.ranks : options.ranksPerNode;
      simCase.onNode = onNodeCost(model, list[v].algorithm);
      grid.cases.push_back(simCase);
      grid.where.emplace_back(v, point);
    }
  }
  return grid;
}

int report(const Options& options, const std::vector<Variant>& list, const Grid& grid,
           const std::vector<ibdt::sim::SimResult>& results, const AlltoallCostModel& model) {
  ibdt::perf::Report times("ibdt-sim: predicted alltoall time (us)", {"ranks", "block", "algorithm", "us"});
  ibdt::perf::Report choice("ibdt-sim: best algorithm vs the automatic choice",
                            {"ranks", "block", "best", "best us", "auto", "auto us", "auto/best"});
  choice.setFileStem("ibdt-sim-choice");
  std::vector<std::map<std::string, double>> byPoint(grid.points.size());
  int failures = 0;
  for (size_t c = 0; c < results.size(); ++c) {
    const auto [v, point] = grid.where[c];
    if (!results[c].mismatch.empty()) {
      std::fprintf(stderr, "ibdt-sim: %s: %s\n", list[v].name.c_str(), results[c].mismatch.c_str());
      ++failures;
    }
    const double us = results[c].seconds * 1e6;
    byPoint[point][list[v].name] = us;
    times.add({{"ranks", grid.points[point].first}, {"block", grid.points[point].second}, {"algorithm", list[v].name},
               {"us", us}});
  }
  for (size_t point = 0; point < grid.points.size(); ++point) {
    const auto [p, b] = grid.points[point];
    const auto best = std::min_element(byPoint[point].begin(), byPoint[point].end(), [](const auto& a, const auto& z) {
      return std::isnan(z.second) || a.second < z.second;  // NaN (not simulated) last
    });
    // kAuto as a persistent init on this platform's nodes (direct-write, not
    // among the simulated algorithms by default, left out).
    const int nodes = options.platform == "one-node" ? 1 : (p + options.ranksPerNode - 1) / options.ranksPerNode;
    const std::string pick = ibdt::collectives::selectAlltoall(model, p, b, false, nodes).name();
    const auto picked = byPoint[point].find(pick);
    const double pickUs = picked == byPoint[point].end() ? std::numeric_limits<double>::quiet_NaN() : picked->second;
    choice.add({{"ranks", p}, {"block", b}, {"best", best->first}, {"best us", best->second}, {"auto", pick},
                {"auto us", pickUs}, {"auto/best", pickUs / best->second}});
  }
  for (int p : options.ranks) {
    times.plot({"p" + std::to_string(p), "predicted alltoall time, p = " + std::to_string(p), "block", "us",
                "algorithm", "block bytes", "us", {{"ranks", p}}});
  }
  const std::string platform = options.platform == "one-node"
                                   ? "one node of " + std::to_string(options.cores) + " cores"
                                   : "fat tree " + ibdt::sim::fatTreeDescription(options.spec) + ", " +
                                         std::to_string(options.ranksPerNode) + " ranks per node";
  for (ibdt::perf::Report* r : {&times, &choice}) {
    r->note("platform", platform);
    r->note("network model", options.spec.networkModel);
    r->note("on-node costs", model.fromFile() ? "tuning file" : "built-in model (no tuning file)");
  }
  times.print(options.common);
  choice.print(options.common);
  return failures == 0 ? 0 : 1;
}

// One SimGrid child per case, so that a case SimGrid aborts on (its
// max-min solver does at some sizes, docs/simulator.md) loses only its own
// row: reported as not simulated (NaN), the others stand.
std::vector<ibdt::sim::SimResult> simulateEach(const Options& options, const Grid& grid) {
  std::vector<ibdt::sim::SimResult> results(grid.cases.size());
  for (size_t c = 0; c < grid.cases.size(); ++c) {
    auto one = ibdt::sim::simulate(options.spec, {grid.cases[c]}, options.config);
    if (one.isOk()) {
      results[c] = (*one)[0];
      continue;
    }
    results[c].seconds = std::numeric_limits<double>::quiet_NaN();
    results[c].mismatch = "p = " + std::to_string(grid.cases[c].shape.ranks) + ", " +
                          std::to_string(grid.cases[c].shape.blockBytes) + " B not simulated: " + one.status().toString();
  }
  return results;
}

ibdt::messaging::LoadedTuning loadTuning(const std::string& setting) {
  ibdt::messaging::LoadedTuning loaded = ibdt::messaging::loadTuning(setting, ibdt::messaging::currentHostKey("shm"));
  std::fprintf(stderr, "ibdt-sim: tuning: %s\n", loaded.note.c_str());
  return loaded;
}

// The rules extend the tuning file whose costs were simulated (its host key,
// point-to-point paths and fits), so one must be in force.
ibdt::Status checkRulesCanBeWritten(const Options& options, const ibdt::messaging::LoadedTuning& loaded) {
  if (options.writeRules.empty()) return ibdt::Status::ok();
  if (!loaded.tuning) {
    return ibdt::makeError(ibdt::Code::kInvalidArgument,
                           "--write-rules extends this host's tuning file and none is in force (", loaded.note,
                           "): run ibdt-tune, or pass --tune-file PATH");
  }
  return ibdt::Status::ok();
}

void addOptions(CLI::App& app, Options& o) {
  app.add_option("--ranks", o.ranks, "rank counts")->delimiter(',');
  app.add_option("--ranks-per-node", o.ranksPerNode, "ranks per node (fat-tree)")->check(CLI::Range(1, 1 << 16));
  app.add_option("--block-sizes", o.blockSizes, "block bytes")->delimiter(',');
  app.add_option("--algorithms", o.algorithms, "algorithms (bruck-radix: once per --radixes)")->delimiter(',');
  app.add_option("--radixes", o.radixes, "bruck-radix radixes")->delimiter(',');
  app.add_option("--leaders", o.leaders, "hierarchical: leaders per node")->check(CLI::Range(1, 1024));
  app.add_option("--throttle", o.throttle, "pairwise: rounds in flight (0: all)")->check(CLI::NonNegativeNumber);
  app.add_option("--platform", o.platform, "fat-tree or one-node")->check(CLI::IsMember({"fat-tree", "one-node"}));
  app.add_option("--cores", o.cores, "one-node: cores of the node")->check(CLI::Range(1, 1 << 16));
  app.add_option("--fat-tree", o.spec.fatTree, "SimGrid fat tree levels;down;up;links (default: 2 levels)");
  app.add_option("--leaf-radix", o.spec.leafRadix, "nodes per leaf switch")->check(CLI::Range(1, 1 << 16));
  app.add_option("--ib-bandwidth", o.spec.ibBandwidth, "IB link bytes/s")->check(CLI::PositiveNumber);
  app.add_option("--ib-latency", o.spec.ibLatency, "IB link latency s")->check(CLI::NonNegativeNumber);
  app.add_option("--intra-bandwidth", o.spec.intraBandwidth, "intra-node bytes/s")->check(CLI::PositiveNumber);
  app.add_option("--intra-latency", o.spec.intraLatency, "intra-node latency s")->check(CLI::NonNegativeNumber);
  app.add_option("--network-model", o.spec.networkModel, "SimGrid network/model: LV08 (default), CM02 or IB (small platforms only)");
  app.add_option("--cfg", o.config, "extra SimGrid setting name:value (repeatable)");
  app.add_option("--tune-file", o.tuneFile, "tuning file: auto, off or a path (IBDT_TUNE_FILE's values)");
  app.add_option("--write-rules", o.writeRules,
                 "write the tuning file with the simulated times as the selection's rules to FILE");
  app.add_flag("--json", o.common.json, "JSON on stdout");
  app.add_option("--out", o.common.outDir, "write the JSON and SVG plots here");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ibdt-sim: SimGrid predictions of the all-to-all algorithms (docs/simulator.md)"};
  Options options;
  addOptions(app, options);
  CLI11_PARSE(app, argc, argv);
  ibdt::Result<std::vector<Variant>> list = variants(options);
  if (!list.isOk()) {
    std::fprintf(stderr, "ibdt-sim: %s\n", list.status().toString().c_str());
    return 2;
  }
  const ibdt::messaging::LoadedTuning loaded = loadTuning(options.tuneFile);
  if (ibdt::Status ready = checkRulesCanBeWritten(options, loaded); !ready.isOk()) {
    std::fprintf(stderr, "ibdt-sim: %s\n", ready.toString().c_str());
    return 2;
  }
  const AlltoallCostModel model = AlltoallCostModel::fromTuning(loaded.tuning ? &*loaded.tuning : nullptr);
  const Grid grid = makeGrid(options, *list, model);
  int nodes = 1;
  for (const auto& simCase : grid.cases) {
    nodes = std::max(nodes, (simCase.shape.ranks + simCase.shape.ranksPerNode - 1) / simCase.shape.ranksPerNode);
  }
  options.spec.nodes = nodes;
  options.spec.coresPerNode = options.platform == "one-node" ? options.cores : options.ranksPerNode;
  const std::vector<ibdt::sim::SimResult> results = simulateEach(options, grid);
  const int status = report(options, *list, grid, results, model);
  if (options.writeRules.empty()) return status;
  const ibdt::Status written = ibdt::sim::writeRules(
      options.writeRules, *loaded.tuning, ibdt::sim::rulesFromResults(grid.cases, results), model);
  if (!written.isOk()) {
    std::fprintf(stderr, "ibdt-sim: --write-rules %s: %s\n", options.writeRules.c_str(), written.toString().c_str());
    return 1;
  }
  std::fprintf(stderr, "ibdt-sim: wrote the selection's rules to %s\n", options.writeRules.c_str());
  return status;
}
