// ibdt-bench alltoallv — MPI_Alltoallv semantics among N forked ranks of
// this host (default 4) over the distributions of perf/alltoallv_cases.h
// (regular, uniform, power law, one hot rank) at mean 64 B .. 64 KiB per
// pair. Rows: ibdt's persistent alltoall (regular only: what alltoallv is
// measured against, Träff et al. Figures 8-9), persistent alltoallv,
// alltoallv with init per call (regular only), and the in-place alltoallv
// with 1 %, 10 % and 100 % of the incoming bytes as auxiliary memory
// (Hofmann/Rünger Figure 2), each with the scratch it held; beside them, in
// the same run, Open MPI's MPI_Alltoallv and its MPI_IN_PLACE form
// (perf/mpi_alltoallv_baseline.cc). Every row's data is checked byte by byte
// once before timing; each repetition is ibdt's barrier then several calls,
// counted as the slowest rank's time; median, min and max. With --out DIR
// an SVG plot per (ranks, distribution) is written beside the JSON.
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ibdt/collectives.h"
#include "ibdt/messaging.h"
#include "perf/alltoallv_cases.h"
#include "perf/benchmarks.h"
#include "perf/forked_ranks.h"
#include "perf/mpi_baseline_runner.h"

namespace ibdt::perf {
namespace {

using collectives::Communicator;
using collectives::Plan;
using datatype::Datatype;

struct BenchOptions {
  std::vector<int> ranks;          // empty: 4
  std::vector<int64_t> means;      // empty: alltoallvMeans()
  std::vector<std::string> dists;  // empty: all
  std::string provider = "auto";
};

struct Setup {
  std::vector<int64_t> means;
  std::vector<std::string> dists;
  int reps = 0, warmup = 0;
  bool quick = false;
};

constexpr int kInPlacePercents[] = {1, 10, 100, 0};  // 0: auto, default budget

void addRow(Report& report, int ranks, const std::string& dist, int64_t mean, const std::string& row,
            const Summary& seconds, double extraBytes) {
  nlohmann::json line = {{"ranks", ranks},          {"dist", dist},
                         {"bytes/pair", mean},      {"row", row},
                         {"us", seconds.median * 1e6}, {"us min", seconds.min * 1e6},
                         {"us max", seconds.max * 1e6}};
  if (extraBytes >= 0) line["extra KiB/rank"] = extraBytes / 1024;
  report.add(line);
}

// One ibdt rank's measurement of `once` (checked first by `check`): the
// slowest rank's time per call, and the largest scratch any rank held.
struct Measured {
  Summary seconds;
  double extraBytes = 0;
};

Result<Measured> measureRow(messaging::Bootstrap& bootstrap, Communicator& comm, const Setup& setup, int64_t mean,
                            const std::string& row, const std::function<Status()>& once,
                            const std::function<std::string()>& check, const std::function<int64_t()>& extra) {
  Status first = once();
  const std::string wrong = first.isOk() ? check() : first.toString();
  IBDT_ASSIGN_OR_RETURN(std::string anyWrong, agreeAcrossRanks(bootstrap, wrong));
  if (!anyWrong.empty()) return makeError(Code::kInternal, row, ": ", anyWrong);
  const int calls = alltoallvCallsPerRep(mean);
  std::vector<double> mine;
  for (int rep = 0; rep < setup.warmup + setup.reps; ++rep) {
    IBDT_RETURN_IF_ERROR(collectives::barrier(comm, Deadline::after(std::chrono::seconds(60))));
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) IBDT_RETURN_IF_ERROR(once());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (rep >= setup.warmup) mine.push_back(seconds / calls);
  }
  mine.push_back(static_cast<double>(extra()));  // the last slot: scratch, maxed like the times
  IBDT_ASSIGN_OR_RETURN(std::vector<double> slowest, slowestAcrossRanks(bootstrap, mine));
  Measured measured;
  measured.extraBytes = slowest.back();
  slowest.pop_back();
  measured.seconds = summarize(std::move(slowest));
  return measured;
}

Status runPlan(Plan& plan) {
  IBDT_RETURN_IF_ERROR(plan.start());
  return plan.wait(Deadline::after(std::chrono::seconds(60)));
}

// Every ibdt row of one (distribution, mean).
Status runIbdtCase(messaging::Bootstrap& bootstrap, Communicator& comm, const Setup& setup, const std::string& dist,
                   int64_t mean, Report& report) {
  const int size = comm.size(), rank = comm.rank();
  const AlltoallvLayout layout = alltoallvLayout(dist, mean, size, rank);
  const Datatype byte = Datatype::basic(datatype::BasicKind::kByte);
  auto record = [&](const std::string& row, const Measured& measured, bool withExtra) {
    if (rank == 0) addRow(report, size, dist, mean, row, measured.seconds, withExtra ? measured.extraBytes : -1);
  };
  std::vector<uint8_t> send(static_cast<size_t>(layout.sendTotal + 1), 0), recv(static_cast<size_t>(layout.recvTotal + 1), 0);
  fillAlltoallvSend(send, layout, rank);
  auto checkRecv = [&] { return checkAlltoallvReceive(recv, layout, rank); };
  if (dist == "regular") {
    IBDT_ASSIGN_OR_RETURN(Plan plan, collectives::alltoallInit(comm, send.data(), mean, byte, recv.data(), mean, byte));
    IBDT_ASSIGN_OR_RETURN(Measured m, measureRow(bootstrap, comm, setup, mean, "ibdt alltoall", [&] { return runPlan(plan); },
                                                 checkRecv, [&] { return plan.peakExtraBytes(); }));
    record("ibdt alltoall", m, true);
  }
  // "ibdt alltoallv": kAuto (the row names what it chose); then each
  // algorithm forced, persistent, and per call (init + run each call) on
  // regular problems: whether a per-call agreement could pay
  // (docs/alltoallv.md, "Automatic choice").
  IBDT_ASSIGN_OR_RETURN(Plan automatic, collectives::alltoallvInit(comm, send.data(), layout.sendcounts, layout.sdispls,
                                                                   byte, recv.data(), layout.recvcounts, layout.rdispls,
                                                                   byte));
  IBDT_ASSIGN_OR_RETURN(Measured m, measureRow(bootstrap, comm, setup, mean, "ibdt alltoallv",
                                               [&] { return runPlan(automatic); }, checkRecv,
                                               [&] { return automatic.peakExtraBytes(); }));
  record("ibdt alltoallv", m, true);
  if (rank == 0) {
    report.note("auto " + dist + " " + std::to_string(mean) + " B at " + std::to_string(size),
                std::string(automatic.algorithm()));
  }
  using collectives::AlltoallvAlgorithm;
  const std::pair<AlltoallvAlgorithm, std::string> forced[] = {{AlltoallvAlgorithm::kPairwise, "pairwise"},
                                                               {AlltoallvAlgorithm::kBruckZeroCopy, "bruck-zero-copy"},
                                                               {AlltoallvAlgorithm::kDirectWrite, "direct-write"},
                                                               {AlltoallvAlgorithm::kSharedMemory, "shared-memory"}};
  for (const auto& [algorithm, name] : forced) {
    collectives::AlltoallvOptions options;
    options.algorithm = algorithm;
    IBDT_ASSIGN_OR_RETURN(Plan plan, collectives::alltoallvInit(comm, send.data(), layout.sendcounts, layout.sdispls,
                                                                byte, recv.data(), layout.recvcounts, layout.rdispls,
                                                                byte, options));
    IBDT_ASSIGN_OR_RETURN(Measured z, measureRow(bootstrap, comm, setup, mean, "ibdt alltoallv " + name,
                                                 [&] { return runPlan(plan); }, checkRecv,
                                                 [&] { return plan.peakExtraBytes(); }));
    record("ibdt alltoallv " + name, z, true);
    if (dist != "regular") continue;
    auto blocking = [&] {
      return collectives::alltoallv(comm, send.data(), layout.sendcounts, layout.sdispls, byte, recv.data(),
                                    layout.recvcounts, layout.rdispls, byte, options,
                                    Deadline::after(std::chrono::seconds(60)));
    };
    IBDT_ASSIGN_OR_RETURN(Measured b, measureRow(bootstrap, comm, setup, mean, "ibdt alltoallv init+run " + name,
                                                 blocking, checkRecv, [] { return int64_t{0}; }));
    record("ibdt alltoallv init+run " + name, b, false);
  }
  if (dist == "regular") {
    auto blocking = [&] {
      return collectives::alltoallv(comm, send.data(), layout.sendcounts, layout.sdispls, byte, recv.data(),
                                    layout.recvcounts, layout.rdispls, byte, {}, Deadline::after(std::chrono::seconds(60)));
    };
    IBDT_ASSIGN_OR_RETURN(Measured b, measureRow(bootstrap, comm, setup, mean, "ibdt alltoallv init+run", blocking,
                                                 checkRecv, [] { return int64_t{0}; }));
    record("ibdt alltoallv init+run", b, false);
  }
  // In place: the limited-memory algorithm at a fraction of the data, then
  // auto with the default budget (one node: the shared segment where every
  // rank's share fits, docs/alltoall-shared-memory.md).
  std::vector<uint8_t> single(static_cast<size_t>(std::max(layout.sendTotal, layout.recvTotal) + 1), 0);
  for (int percent : kInPlacePercents) {
    collectives::AlltoallvOptions options;
    if (percent > 0) {
      options.algorithm = AlltoallvAlgorithm::kInPlaceLimited;
      options.inplaceBytes = std::max<int64_t>(1, layout.recvTotal * percent / 100);
    }
    IBDT_ASSIGN_OR_RETURN(Plan inPlace, collectives::alltoallvInit(comm, collectives::kInPlace, layout.sendcounts,
                                                                   layout.sdispls, Datatype(), single.data(),
                                                                   layout.recvcounts, layout.rdispls, byte, options));
    std::fill(single.begin(), single.end(), 0);
    fillAlltoallvSend(single, layout, rank);
    const std::string row = percent > 0 ? "ibdt in-place " + std::to_string(percent) + "%" : "ibdt in-place";
    if (percent == 0 && rank == 0) {
      report.note("auto in place " + dist + " " + std::to_string(mean) + " B at " + std::to_string(size),
                  std::string(inPlace.algorithm()));
    }
    IBDT_ASSIGN_OR_RETURN(Measured i, measureRow(bootstrap, comm, setup, mean, row, [&] { return runPlan(inPlace); },
                                                 [&] { return checkAlltoallvReceive(single, layout, rank); },
                                                 [&] { return inPlace.peakExtraBytes(); }));
    record(row, i, true);
  }
  return Status::ok();
}

Status runIbdtRank(messaging::Bootstrap& bootstrap, const BenchOptions& options, const Setup& setup,
                   const std::string& jobTag, Report& report) {
  IBDT_ASSIGN_OR_RETURN(auto domain, fabric::openDomain(options.provider, {jobTag, ""}));
  IBDT_ASSIGN_OR_RETURN(messaging::Options messagingOptions, messaging::optionsFromEnvironment());
  IBDT_ASSIGN_OR_RETURN(auto context, messaging::Context::create(*domain, bootstrap, messagingOptions));
  IBDT_ASSIGN_OR_RETURN(auto comm, Communicator::create(*context));
  for (const std::string& dist : setup.dists) {
    for (int64_t mean : setup.means) IBDT_RETURN_IF_ERROR(runIbdtCase(bootstrap, *comm, setup, dist, mean, report));
  }
  return context->close(Deadline::after(std::chrono::seconds(60)));
}

void runMpi(const MpiLibrary& library, int ranks, const Setup& setup, Report& report) {
  const std::string key = library.name + " at " + std::to_string(ranks) + " ranks";
  if (library.label == "mpich") {
    report.note(key, "skipped: MPICH's ranks spin without yielding on this oversubscribed 2-core machine "
                     "(see ibdt-bench alltoall)");
    return;
  }
  std::string means, dists;
  for (int64_t mean : setup.means) means += (means.empty() ? "" : ",") + std::to_string(mean);
  for (const std::string& dist : setup.dists) dists += (dists.empty() ? "" : ",") + dist;
  const std::vector<std::string> args = {"--bytes", means, "--dists", dists, "--reps", std::to_string(setup.reps),
                                         "--warmup", std::to_string(setup.warmup)};
  for (const nlohmann::json& line : runMpiRows(library, library.alltoallvProgram, ranks, args,
                                               std::chrono::seconds(setup.quick ? 300 : 600), report, key)) {
    const Summary seconds = summaryOf(line["time"]);
    const std::string row = library.name + (line["row"] == "in-place" ? " alltoallv in-place" : " alltoallv");
    addRow(report, ranks, line["dist"].get<std::string>(), line["bytes"].get<int64_t>(), row, seconds, -1);
  }
}

void runAlltoallv(const BenchOptions& options, const CommonOptions& common) {
  Report report("alltoallv: MPI_Alltoallv semantics, N ranks on this host; time per call (slowest rank), bytes "
                "per pair is the distribution's mean",
                {"ranks", "dist", "bytes/pair", "row", "us", "us min", "us max", "extra KiB/rank"});
  Setup setup;
  setup.quick = common.quick;
  setup.means = options.means.empty() ? alltoallvMeans(common.quick) : options.means;
  setup.dists = options.dists.empty() ? alltoallvDistributions() : options.dists;
  setup.reps = common.quick ? 3 : common.reps;
  setup.warmup = common.quick ? 1 : std::max(common.warmup, 5);
  const std::vector<int> rankCounts = options.ranks.empty() ? std::vector<int>{4} : options.ranks;
  for (int ranks : rankCounts) {
    const std::string jobTag = "alltoallv-bench-" + std::to_string(getpid()) + "-" + std::to_string(ranks);
    runForkedRanks("alltoallv", ranks, [&](messaging::Bootstrap& bootstrap) {
      return runIbdtRank(bootstrap, options, setup, jobTag, report);
    });
    for (const MpiLibrary& library : mpiLibraries()) runMpi(library, ranks, setup, report);
    if (ranks > sysconf(_SC_NPROCESSORS_ONLN)) {
      report.note("oversubscribed at " + std::to_string(ranks) + " ranks",
                  "more ranks than cores: times include waiting for a core");
    }
  }
  report.note("ibdt", "persistent plans started per call (init+run: the blocking call, init and its pair check "
                      "every time); in-place: auxiliary memory = the given % of the rank's incoming bytes, "
                      "b = max(1, p/8) buffers");
  report.note("extra KiB/rank", "scratch the ibdt algorithm held (largest rank; messaging's staging not counted); "
                                "not measured for MPI");
  report.note("machine", machineDescription());
  for (int ranks : rankCounts) {  // with --out: time against size, a plot per (ranks, distribution)
    for (const std::string& dist : setup.dists) {
      report.plot({"p" + std::to_string(ranks) + "-" + dist,
                   "alltoallv, " + std::to_string(ranks) + " ranks, " + dist + " (" + machineDescription() + ")",
                   "bytes/pair", "us", "row", "mean bytes per pair", "microseconds per call (slowest rank)",
                   {{"ranks", ranks}, {"dist", dist}}});
    }
  }
  report.print(common);
}

}  // namespace

void addAlltoallvBenchmark(CLI::App& app, const CommonOptions& common) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* sub = app.add_subcommand("alltoallv", "alltoallv (direct, in place) among forked ranks vs MPI_Alltoallv");
  sub->fallthrough();
  sub->add_option("--ranks", options->ranks, "rank counts (default 4)")->check(CLI::Range(2, 64));
  sub->add_option("--bytes", options->means, "mean bytes per pair (default 64, 4096, 65536)")
      ->check(CLI::Range(int64_t{4}, int64_t{1} << 22));
  sub->add_option("--dist", options->dists, "distributions (default all)")
      ->check(CLI::IsMember(alltoallvDistributions()));
  sub->add_option("--provider", options->provider, "fabric provider (auto, shm, verbs)");
  sub->callback([options, &common] { runAlltoallv(*options, common); });
}

}  // namespace ibdt::perf
