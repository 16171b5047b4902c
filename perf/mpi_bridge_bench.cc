// perf/mpi_bridge_bench.cc — `ibdt-bench mpi`: the MPI bridge (mpi/,
// docs/mpi.md) against each MPI library's own calls, in one run: MPI_Pack
// against IBDT_Pack on the pack cases (a singleton process), and
// MPI_Alltoall / MPI_Alltoallv through the bridge against PMPI_Alltoall(v)
// under the library's launcher at each rank count. The measuring is done by
// perf/mpi_bridge_program.cc (one per MPI library), which checks every
// result and fails the run when ibdt's data or counters are wrong. With
// --out: the JSON and a plot of time per call against size per (library,
// ranks, call).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cctype>
#include <memory>
#include <string>
#include <vector>

#include "perf/alltoall_cases.h"
#include "perf/benchmarks.h"
#include "perf/mpi_baseline_runner.h"

namespace ibdt::perf {
namespace {

struct MpiBenchOptions {
  std::vector<int> ranks;      // default: 2 and 4 (MPICH: up to the cores)
  std::vector<int64_t> bytes;  // default: 8, 4096, 65536 (--quick: 8, 4096)
};

// A row of both sides in `unit`; gain > 1: ibdt is faster.
void addRow(Report& report, const MpiLibrary& library, const nlohmann::json& line, int ranks) {
  const bool pack = line["row"] == "MPI_Pack";
  const double bytes = line["bytes"].get<double>();
  auto value = [&](double seconds) { return pack ? bytes / seconds / 1e9 : seconds * 1e6; };
  const Summary mpi = summaryOf(line["mpi"]), ibdt = summaryOf(line["ibdt"]);
  nlohmann::json row = {{"library", library.name}, {"call", line["row"]}, {"unit", pack ? "GB/s" : "us"},
                        {"MPI", value(mpi.median)}, {"ibdt", value(ibdt.median)},
                        {"gain", mpi.median / ibdt.median}};
  // For GB/s the slowest repetition is the minimum.
  row["MPI min"] = value(pack ? mpi.max : mpi.min);
  row["MPI max"] = value(pack ? mpi.min : mpi.max);
  row["ibdt min"] = value(pack ? ibdt.max : ibdt.min);
  row["ibdt max"] = value(pack ? ibdt.min : ibdt.max);
  if (line.contains("ibdt blocking")) {
    const Summary blocking = summaryOf(line["ibdt blocking"]);
    row["ibdt blocking"] = value(blocking.median);
    row["blocking / persistent"] = blocking.median / ibdt.median;
  }
  if (pack) {
    row["case"] = line["case"];
  } else {
    row["ranks"] = ranks;
    row["bytes/pair"] = line["bytes"];
  }
  report.add(std::move(row));
}

void runLibrary(const MpiLibrary& library, const MpiBenchOptions& options, const CommonOptions& common,
                Report& report) {
  const std::chrono::seconds timeout(common.quick ? 120 : 600);
  const std::vector<std::string> repetition = {"--reps", std::to_string(common.quick ? 3 : common.reps), "--warmup",
                                               std::to_string(common.quick ? 1 : common.warmup)};
  std::vector<std::string> args = {"--pack"};
  if (common.quick) args.emplace_back("--quick");
  args.insert(args.end(), repetition.begin(), repetition.end());
  const std::vector<nlohmann::json> packRows =
      runMpiRows(library, library.bridgeProgram, 1, args, timeout, report, library.name + " MPI_Pack");
  if (packRows.empty()) reportFailure(library.name + " MPI_Pack: nothing measured (see the report's notes)");
  for (const nlohmann::json& line : packRows) addRow(report, library, line, 1);
  std::string sizes;
  for (int64_t b : options.bytes) sizes += (sizes.empty() ? "" : ",") + std::to_string(b);
  // The alltoalls take as many repetitions as ibdt-bench alltoall does for
  // the same --reps (at least 40, 300 up to 512 B: perf/alltoall_cases.h),
  // so that their rows compare with its native plan's.
  const std::vector<std::string> alltoallRepetition = {
      "--reps", std::to_string(common.quick ? 3 : std::max(common.reps, kAlltoallMinReps)), "--warmup",
      std::to_string(common.quick ? 1 : common.warmup)};
  const std::vector<int> rankCounts = options.ranks.empty() ? std::vector<int>{2, 4} : options.ranks;
  for (int ranks : rankCounts) {
    const std::string key = library.name + " alltoall at " + std::to_string(ranks) + " ranks";
    if (library.label == "mpich" && ranks > sysconf(_SC_NPROCESSORS_ONLN)) {
      report.note(key, "skipped: MPICH's ranks spin without yielding when oversubscribed");
      continue;
    }
    args = {"--alltoall", "--bytes", sizes};
    args.insert(args.end(), alltoallRepetition.begin(), alltoallRepetition.end());
    const std::vector<nlohmann::json> rows = runMpiRows(library, library.bridgeProgram, ranks, args, timeout, report, key);
    if (rows.empty()) reportFailure(key + ": nothing measured (see the report's notes)");
    for (const nlohmann::json& line : rows) addRow(report, library, line, ranks);
  }
}

// The target for the preloaded library (docs/mpi.md): the blocking
// MPI_Alltoall at most 1.11x ibdt's persistent plan. The "MPI_Alltoall_init"
// rows time both in turn, repetition by repetition, in the same processes,
// so that the machine's phase does not enter the ratio.
void notePreloadedAgainstPersistent(Report& report) {
  constexpr double kTarget = 1.0 / 0.9;
  int met = 0, cells = 0;
  double worst = 0;
  std::string cellsText;
  for (const nlohmann::json& row : report.rows()) {
    if (!row.contains("blocking / persistent")) continue;
    const double ratio = row["blocking / persistent"].get<double>();
    ++cells;
    met += ratio <= kTarget ? 1 : 0;
    worst = std::max(worst, ratio);
    cellsText += strCat(cellsText.empty() ? "" : "; ", row["library"].get<std::string>(), " ",
                        row["ranks"].get<int>(), " ranks ", row["bytes/pair"].get<int64_t>(), " B ",
                        row["call"] == "MPI_Alltoall_init vector" ? "vector " : "contig ",
                        std::lround(ratio * 100) / 100.0);
  }
  if (cells == 0) return;
  report.note("preloaded / persistent",
              strCat("the bridge's blocking MPI_Alltoall over its persistent plan (MPI_Alltoall_init), timed in "
                     "turn in the same processes, target at most 1.11: met in ",
                     met, " of ", cells, " cells, worst ", std::lround(worst * 100) / 100.0, " (", cellsText, ")"));
}

void runMpiBench(MpiBenchOptions options, const CommonOptions& common) {
  Report report("mpi: the MPI bridge (ibdt) against the MPI library's own calls; pack: GB/s, single process; "
                "alltoall(v): us per call, slowest rank; gain = MPI time / ibdt time",
                {"library", "call", "case", "ranks", "bytes/pair", "unit", "MPI", "MPI min", "MPI max", "ibdt",
                 "ibdt min", "ibdt max", "gain", "ibdt blocking", "blocking / persistent"});
  if (options.bytes.empty()) options.bytes = common.quick ? std::vector<int64_t>{8, 4096} : std::vector<int64_t>{8, 4096, 65536};
  bool any = false;
  for (const MpiLibrary& library : mpiLibraries()) {
    if (library.bridgeProgram.empty()) continue;
    any = true;
    runLibrary(library, options, common, report);
  }
  notePreloadedAgainstPersistent(report);
  if (!any) report.note("MPI", "not measured: ibdt-bench was built without an MPI bridge (no MPI library found)");
  report.note("method", "one program per MPI links libibdt_mpi_<mpi>.so before MPI: MPI_Alltoall(v) are the "
                        "bridge's (as with LD_PRELOAD), PMPI_Alltoall(v) the library's own, IBDT_Pack against "
                        "PMPI_Pack; the two sides alternate repetition by repetition; every result is checked "
                        "byte by byte first");
  report.note("statistics", "per row: the median after Tukey's filter (repetitions above Q3 + 1.5 IQR dropped, as "
                            "ibdt-bench alltoall does), min and max of all repetitions; alltoalls: at least 40 "
                            "repetitions, 300 up to 512 B per pair");
  report.note("machine", machineDescription());
  for (const nlohmann::json& row : report.rows()) {
    if (!row.contains("ranks")) continue;
    const std::string name = row["library"].get<std::string>() + "-p" + std::to_string(row["ranks"].get<int>()) +
                             "-" + row["call"].get<std::string>();
    std::string slug;
    for (char c : name) slug += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : '-';
    if (row["bytes/pair"] != options.bytes.front()) continue;  // one plot per (library, ranks, call)
    report.plot({slug, name + " (" + machineDescription() + ")", "bytes/pair", "", "", "bytes per pair",
                 "microseconds per call (slowest rank)",
                 {{"library", row["library"]}, {"ranks", row["ranks"]}, {"call", row["call"]}}, {"MPI", "ibdt"}});
  }
  report.print(common);
}

}  // namespace

void addMpiBenchmark(CLI::App& app, const CommonOptions& common) {
  auto options = std::make_shared<MpiBenchOptions>();
  CLI::App* sub = app.add_subcommand("mpi", "the MPI bridge vs the MPI library: MPI_Pack, MPI_Alltoall(v)");
  sub->fallthrough();
  sub->add_option("--ranks", options->ranks, "rank counts of the alltoalls (default 2 4)")->check(CLI::Range(2, 64));
  sub->add_option("--bytes", options->bytes, "bytes per pair, multiples of 8 (default 8 4096 65536)")
      ->check(CLI::Range(int64_t{8}, int64_t{1} << 24));
  sub->callback([options, &common] { runMpiBench(*options, common); });
}

}  // namespace ibdt::perf
