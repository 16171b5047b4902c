// ibdt-bench alltoall — MPI_Alltoall semantics among N ranks of this host
// (the bench forks them; N = 2, 4, 8): per pair 8 B .. 64 KiB, contiguous
// bytes and a strided vector send type received contiguous
// (perf/alltoall_cases.h). ibdt runs each --algorithm (default auto, the
// cost model's choice, docs/alltoall-selection.md; pairwise, bruck-basic, bruck-modified,
// bruck-zero-copy, bruck-radix-<r>, direct-write, shared-memory) in each --mode: persistent (one plan per
// case, start + wait per call) and blocking (alltoall(): init + start + wait
// per call); one row per algorithm and mode. Beside it, in the same run: Open MPI's
// MPI_Alltoall under mpirun (perf/mpi_alltoall_baseline.cc), MPICH's at 2
// ranks only, and a memcpy of the same bytes within one process. Every
// result is checked byte by byte once before timing; each repetition is a
// barrier (ibdt's own, as the baseline uses MPI_Barrier) and then several
// alltoalls, timed on every rank, and counts as the slowest rank's time;
// Träff's statistics over the repetitions (docs/alltoall-bruck.md,
// "Benchmark statistics"): Tukey's filter, median and its 95 % CI, plan
// creation time, context switches; --compare-auto notes auto / best forced.
// The algorithms of one mode and layout are timed together, their
// repetitions interleaved, so a phase of the machine falls on all alike.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ibdt/collectives.h"
#include "ibdt/messaging.h"
#include "perf/alltoall_cases.h"
#include "perf/benchmarks.h"
#include "perf/forked_ranks.h"
#include "perf/mpi_baseline_runner.h"
#include "perf/simulated_nodes.h"

namespace ibdt::perf {
namespace {

using collectives::AlltoallOptions;
using collectives::Communicator;
using datatype::Datatype;

struct BenchOptions {
  std::vector<int> ranks;         // empty: 2, 4, 8
  std::vector<int64_t> bytes;     // empty: alltoallBytes()
  std::vector<std::string> rows;  // empty: every row
  int64_t throttle = -1;          // <0: IBDT_ALLTOALL_THROTTLE
  std::string provider = "auto";
  std::vector<std::string> algorithms;  // empty: auto
  std::vector<std::string> modes;       // empty: persistent
  int nodes = 1;  // > 1: a simulated node map (blocks), and a hierarchical row
  bool compareAuto = false;  // auto and every forced algorithm, and auto / best forced
};

// --compare-auto: the forced rows auto is compared with (persistent).
const std::vector<std::string> kForcedAlgorithms = {"pairwise",        "bruck-basic",   "bruck-modified",
                                                    "bruck-zero-copy", "bruck-radix-3", "bruck-radix-4",
                                                    "bruck-radix-8",   "direct-write"};
// ... and with --nodes K > 1 the node-aware one (its leader exchange auto),
// on one node the shared-memory one.
const std::string kNodeAwareForced = "hierarchical";
const std::string kOneNodeForced = "shared-memory";

// An --algorithm value: a name of withAlltoallAlgorithm, or hierarchical-direct/-bruck.
Result<AlltoallOptions> algorithmOptions(const std::string& name, AlltoallOptions options) {
  // hierarchical-direct / hierarchical-bruck: the leaders' exchange forced.
  for (auto exchange : {collectives::LeaderExchange::kDirect, collectives::LeaderExchange::kBruck}) {
    if (name == "hierarchical-" + std::string(collectives::leaderExchangeName(exchange))) {
      options.algorithm = collectives::AlltoallAlgorithm::kHierarchical;
      options.leaderExchange = exchange;
      return options;
    }
  }
  return collectives::withAlltoallAlgorithm(options, name);
}

// "ibdt contig" for the automatic choice, persistent (the rows before
// algorithms could be forced); else "ibdt <algorithm>[ blocking] contig".
std::string ibdtRow(const std::string& algorithm, bool blocking, bool vector) {
  std::string who = "ibdt";
  if (algorithm != "auto") who += " " + algorithm;
  if (blocking) who += " blocking";
  return who + (vector ? " vector" : " contig");
}

struct Setup {
  std::vector<int64_t> bytes;
  int reps = 0;
  int warmup = 0;
  bool quick = false;
};

constexpr const char* kMpiLibraryNames[] = {"Open MPI", "MPICH"};
constexpr int kAlltoallWarmupReps = 25;  // >= 50 calls: every eager buffer (32 per peer) used once
constexpr const char* kMemcpyRow = "memcpy";

bool wanted(const BenchOptions& options, const std::string& row) {
  return options.rows.empty() || std::find(options.rows.begin(), options.rows.end(), row) != options.rows.end();
}

std::string rowName(const std::string& who, bool vector) { return who + (vector ? " vector" : " contig"); }

// What a row measured beyond its times.
struct RowExtras {
  std::string algorithm = "-";  // what the plan ran (auto's choice)
  double switchesPerCall = -1;  // voluntary context switches per alltoall (most of any rank); <0: not measured
  double preemptionsPerCall = -1;  // involuntary ones (preempted while runnable, e.g. after a yield)
  double planSeconds = -1;      // plan creation (init + destroy), median of the slowest rank; <0: none
};

void addRow(Report& report, int ranks, int64_t bytes, const std::string& row, const RobustSummary& seconds,
            int64_t bytesMoved, const RowExtras& extras = {}) {
  auto orNull = [](double value, double scale) { return value < 0 ? nlohmann::json() : nlohmann::json(value * scale); };
  report.add({{"ranks", ranks},
              {"bytes/pair", bytes},
              {"row", row},
              {"algorithm", extras.algorithm},
              {"us", seconds.median * 1e6},
              {"us CI low", seconds.ciLow * 1e6},
              {"us CI high", seconds.ciHigh * 1e6},
              {"us min", seconds.min * 1e6},
              {"us max", seconds.max * 1e6},
              {"dropped", seconds.dropped},
              {"ctx sw/call", orNull(extras.switchesPerCall, 1)},
              {"invol sw/call", orNull(extras.preemptionsPerCall, 1)},
              {"plan us", orNull(extras.planSeconds, 1e6)},
              {"MB/s per rank", static_cast<double>(bytesMoved) / seconds.median / 1e6}});
}

// Voluntary and involuntary context switches of this process so far.
std::pair<long, long> contextSwitches() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return {usage.ru_nvcsw, usage.ru_nivcsw};
}

// The send and receive sides of one row, as ibdt types.
struct Layout {
  Datatype sendType, recvType;
  int64_t sendCount = 0, recvCount = 0;
};

Result<Layout> layoutOf(bool vector, int64_t bytes) {
  const Datatype byte = Datatype::basic(datatype::BasicKind::kByte);
  if (!vector) return Layout{byte, byte, bytes, bytes};
  IBDT_ASSIGN_OR_RETURN(Datatype pieces, Datatype::vector(bytes / kAlltoallPiece, kAlltoallPiece / 4,
                                                          kAlltoallGap / 4, Datatype::of<int32_t>()));
  IBDT_ASSIGN_OR_RETURN(Datatype send, Datatype::resized(pieces, 0, alltoallSendExtent(true, bytes)));
  IBDT_RETURN_IF_ERROR(send.commit());
  return Layout{send, Datatype::of<int32_t>(), 1, bytes / 4};
}

// Plan creation alone (Träff's Figures 6-7: init with no communication
// started): `reps` alltoallInit + destroy, the slowest rank's median. Auto's
// plans include the selection (and, across nodes, its agreement).
Result<double> timePlanCreation(messaging::Bootstrap& bootstrap, Communicator& comm, const AlltoallOptions& alltoall,
                                const Layout& layout, AlltoallBuffer& send, AlltoallBuffer& recv,
                                int reps) {
  std::vector<double> mine;
  for (int rep = 0; rep < reps; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    {
      IBDT_ASSIGN_OR_RETURN(collectives::Plan plan,
                            collectives::alltoallInit(comm, send.data(), layout.sendCount, layout.sendType,
                                                      recv.data(), layout.recvCount, layout.recvType, alltoall));
    }
    mine.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  IBDT_ASSIGN_OR_RETURN(std::vector<double> slowest, slowestAcrossRanks(bootstrap, mine));
  return summarize(std::move(slowest)).median;
}

// A row of ibdt: an algorithm's options and the row's name.
struct IbdtRow {
  AlltoallOptions alltoall;
  std::string name;
};

// What one row collects at one size while the rows are timed together.
struct RowRun {
  const IbdtRow* row;
  AlltoallBuffer send, recv;
  collectives::Plan plan;
  double planSeconds = 0;
  std::vector<double> mine;
  double switches = 0, preemptions = 0;
};

// Rows timed together hold their buffers at once: at most this much.
constexpr int64_t kTogetherBytes = int64_t{256} << 20;

// The rows at `bytes` per pair, each checked once, then timed with their
// repetitions interleaved (row A's, row B's, ..., the first row rotating):
// a phase of the machine falls on every row alike, so the rows' ratios
// (--compare-auto's auto / best forced) compare like with like.
Status measureTogether(messaging::Bootstrap& bootstrap, Communicator& comm, std::span<const IbdtRow> rows,
                       bool vector, bool blocking, int64_t bytes, const Setup& setup, Report& report) {
  const int size = comm.size(), rank = comm.rank();
  IBDT_ASSIGN_OR_RETURN(Layout layout, layoutOf(vector, bytes));
  std::vector<std::unique_ptr<RowRun>> runs;
  for (const IbdtRow& row : rows) {
    auto run = std::make_unique<RowRun>();
    run->row = &row;
    run->recv.assign(static_cast<size_t>(bytes * size), 0);
    fillAlltoallSend(run->send, vector, bytes, size, rank);
    IBDT_ASSIGN_OR_RETURN(run->plan, collectives::alltoallInit(comm, run->send.data(), layout.sendCount,
                                                               layout.sendType, run->recv.data(), layout.recvCount,
                                                               layout.recvType, row.alltoall));
    runs.push_back(std::move(run));
  }
  auto once = [&](RowRun& run) -> Status {
    if (blocking) {
      return collectives::alltoall(comm, run.send.data(), layout.sendCount, layout.sendType, run.recv.data(),
                                   layout.recvCount, layout.recvType, run.row->alltoall);
    }
    IBDT_RETURN_IF_ERROR(run.plan.start());
    return run.plan.wait();
  };
  for (auto& run : runs) {
    Status checked = once(*run);
    std::string wrong = checked.isOk() ? checkAlltoallReceive(run->recv, bytes, size, rank) : checked.toString();
    IBDT_ASSIGN_OR_RETURN(std::string anyWrong, agreeAcrossRanks(bootstrap, wrong));
    if (!anyWrong.empty()) return makeError(Code::kInternal, run->row->name, ": ", anyWrong);
    IBDT_ASSIGN_OR_RETURN(run->planSeconds, timePlanCreation(bootstrap, comm, run->row->alltoall, layout, run->send,
                                                             run->recv, setup.quick ? 3 : 20));
  }
  const int calls = alltoallCallsPerRep(bytes), reps = alltoallRepsFor(bytes, setup.reps);
  for (int rep = 0; rep < setup.warmup + reps; ++rep) {
    for (size_t k = 0; k < runs.size(); ++k) {
      RowRun& run = *runs[(k + static_cast<size_t>(rep)) % runs.size()];
      // Start together through ibdt's own barrier, as the baseline does
      // through MPI_Barrier. Not the bootstrap's sockets: they release the
      // ranks microseconds apart, and a rank woken from a socket read is
      // often placed on its waker's core, where the two then share one.
      IBDT_RETURN_IF_ERROR(collectives::barrier(comm, Deadline::after(std::chrono::seconds(60))));
      const auto before = contextSwitches();
      const auto start = std::chrono::steady_clock::now();
      Status failed;
      for (int i = 0; i < calls && failed.isOk(); ++i) failed = once(run);
      IBDT_RETURN_IF_ERROR(failed);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (rep < setup.warmup) continue;
      run.mine.push_back(seconds / calls);
      const auto after = contextSwitches();
      run.switches += static_cast<double>(after.first - before.first);
      run.preemptions += static_cast<double>(after.second - before.second);
    }
  }
  const double timedCalls = double(reps) * calls;
  for (auto& run : runs) {
    IBDT_ASSIGN_OR_RETURN(std::vector<double> times, slowestAcrossRanks(bootstrap, run->mine));
    IBDT_ASSIGN_OR_RETURN(std::vector<double> mostSwitches,
                          slowestAcrossRanks(bootstrap, {run->switches / timedCalls, run->preemptions / timedCalls}));
    RowExtras extras{std::string(run->plan.algorithm()), mostSwitches[0], mostSwitches[1], run->planSeconds};
    if (rank == 0) addRow(report, size, bytes, run->row->name, robustSummarize(times), (size - 1) * bytes, extras);
  }
  return Status::ok();
}

// The rows at every `setup.bytes`, timed together as far as their buffers
// fit in kTogetherBytes.
Status measureIbdtRows(messaging::Bootstrap& bootstrap, Communicator& comm, const std::vector<IbdtRow>& rows,
                       bool vector, bool blocking, const Setup& setup, Report& report) {
  for (int64_t bytes : setup.bytes) {
    const int64_t perRow = std::max<int64_t>(1, 2 * bytes * comm.size());
    const size_t together = static_cast<size_t>(std::max<int64_t>(1, kTogetherBytes / perRow));
    for (size_t first = 0; first < rows.size(); first += together) {
      const size_t count = std::min(together, rows.size() - first);
      IBDT_RETURN_IF_ERROR(measureTogether(bootstrap, comm, std::span(rows).subspan(first, count), vector, blocking,
                                           bytes, setup, report));
    }
  }
  return Status::ok();
}

// One rank of the ibdt rows for `ranks` processes.
Status runIbdtRank(messaging::Bootstrap& bootstrap, const BenchOptions& options, const Setup& setup,
                   const std::string& jobTag, Report& report) {
  IBDT_ASSIGN_OR_RETURN(auto domain, fabric::openDomain(options.provider, {jobTag, ""}));
  IBDT_ASSIGN_OR_RETURN(messaging::Options messagingOptions, messaging::optionsFromEnvironment());
  IBDT_ASSIGN_OR_RETURN(auto context, messaging::Context::create(*domain, bootstrap, messagingOptions));
  IBDT_ASSIGN_OR_RETURN(auto comm, Communicator::create(*context, simulatedNodes(context->size(), options.nodes)));
  IBDT_ASSIGN_OR_RETURN(AlltoallOptions defaults, collectives::alltoallOptionsFromEnvironment());
  if (options.throttle >= 0) defaults.throttle = options.throttle;
  std::vector<std::string> algorithms = options.algorithms;
  if (options.compareAuto) {
    algorithms = {"auto"};
    algorithms.insert(algorithms.end(), kForcedAlgorithms.begin(), kForcedAlgorithms.end());
    algorithms.push_back(options.nodes > 1 ? kNodeAwareForced : kOneNodeForced);
  }
  if (algorithms.empty()) algorithms = options.nodes > 1 ? std::vector<std::string>{"auto", "hierarchical"}
                                                         : std::vector<std::string>{"auto"};
  const std::vector<std::string> modes = options.modes.empty() ? std::vector<std::string>{"persistent"} : options.modes;
  // The algorithms of one mode and layout are timed together, their
  // repetitions interleaved (measureIbdtRows).
  for (const std::string& mode : modes) {
    for (bool vector : {false, true}) {
      if (!wanted(options, rowName("ibdt", vector))) continue;
      const bool blocking = mode == "blocking";
      std::vector<IbdtRow> rows;
      for (const std::string& algorithm : algorithms) {
        IBDT_ASSIGN_OR_RETURN(AlltoallOptions alltoall, algorithmOptions(algorithm, defaults));
        rows.push_back({alltoall, ibdtRow(algorithm, blocking, vector)});
      }
      IBDT_RETURN_IF_ERROR(measureIbdtRows(bootstrap, *comm, rows, vector, blocking, setup, report));
    }
  }
  return context->close(Deadline::after(std::chrono::seconds(60)));
}

// The same bytes one rank sends and receives, copied block by block in one
// process: what the exchange would cost with no transport at all.
void runMemcpy(int ranks, const Setup& setup, Report& report) {
  for (int64_t bytes : setup.bytes) {
    AlltoallBuffer send(static_cast<size_t>(bytes * ranks), 1), recv(send.size(), 0);
    auto seconds = measure(setup.warmup, alltoallRepsFor(bytes, setup.reps), alltoallCallsPerRep(bytes), [&] {
      for (int peer = 0; peer < ranks; ++peer) {
        std::memcpy(recv.data() + peer * bytes, send.data() + ((peer + 1) % ranks) * bytes, static_cast<size_t>(bytes));
      }
      asm volatile("" : : "r"(recv.data()) : "memory");  // keep the copies
    });
    addRow(report, ranks, bytes, kMemcpyRow, robustSummarize(std::move(seconds)), ranks * bytes);
  }
}

void runMpi(const MpiLibrary& library, int ranks, const BenchOptions& options, const Setup& setup, Report& report) {
  const bool contig = wanted(options, rowName(library.name, false)), vector = wanted(options, rowName(library.name, true));
  if (!contig && !vector) return;
  const std::string key = library.name + " at " + std::to_string(ranks) + " ranks";
  if (library.label == "mpich" && ranks > 2) {
    report.note(key, "skipped: MPICH 4.0's ranks poll shared memory without yielding, so with more ranks than "
                     "cores they spin against each other: 8.8 ms per 8-byte alltoall at 4 ranks and 17.6 ms at 8 "
                     "on the 2-core build machine, which would add minutes to this run");
    return;
  }
  std::string sizes;
  for (int64_t bytes : setup.bytes) sizes += (sizes.empty() ? "" : ",") + std::to_string(bytes);
  const std::vector<std::string> args = {"--bytes", sizes, "--reps", std::to_string(setup.reps), "--warmup",
                                         std::to_string(setup.warmup), "--rows",
                                         std::string(contig ? "contig" : "") + (vector ? ",vector" : "")};
  for (const nlohmann::json& line : runMpiRows(library, library.alltoallProgram, ranks, args,
                                               std::chrono::seconds(setup.quick ? 300 : 900), report, key)) {
    const int64_t bytes = line["bytes"].get<int64_t>();
    const std::string row = line["row"].get<std::string>();
    const bool persistent = row.rfind("persistent ", 0) == 0;
    const Summary plain = summaryOf(line["time"]);
    RobustSummary seconds{plain.median, line["ci"].at(0).get<double>(), line["ci"].at(1).get<double>(),
                          plain.min,    plain.max,                       0,
                          line["dropped"].get<size_t>()};
    RowExtras extras{persistent ? (library.label == "mpich" ? "MPI_Alltoall_init" : "MPIX_Alltoall_init") : "MPI_Alltoall",
                     line["nvcsw"].get<double>(), line["nivcsw"].get<double>(),
                     persistent ? line["init"].get<double>() : -1};
    addRow(report, ranks, bytes, rowName(library.name + (persistent ? " persistent" : ""), row.ends_with("vector")),
           seconds, (ranks - 1) * bytes, extras);
  }
}

// --compare-auto: per rank count, size and layout, auto's median over the
// best forced algorithm's (persistent rows of this run).
void noteAutoAgainstForced(Report& report) {
  std::vector<std::string> lines;
  for (const nlohmann::json& autoRow : report.rows()) {
    const std::string name = autoRow["row"].get<std::string>();
    if (name != "ibdt contig" && name != "ibdt vector") continue;
    const std::string layout = name.substr(5);
    double best = 0;
    std::string bestName;
    std::vector<std::string> forcedRows = kForcedAlgorithms;
    forcedRows.push_back(kNodeAwareForced);  // present with --nodes K > 1
    forcedRows.push_back(kOneNodeForced);    // present without
    for (const std::string& forced : forcedRows) {
      for (const nlohmann::json& row : report.rows()) {
        if (row["row"] != "ibdt " + forced + " " + layout || row["ranks"] != autoRow["ranks"] ||
            row["bytes/pair"] != autoRow["bytes/pair"])
          continue;
        const double us = row["us"].get<double>();
        if (bestName.empty() || us < best) best = us, bestName = forced;
      }
    }
    if (bestName.empty()) continue;
    char text[200];
    std::snprintf(text, sizeof text, "p=%d %lld B %s: auto (%s) / best forced (%s) = %.2f",
                  autoRow["ranks"].get<int>(), static_cast<long long>(autoRow["bytes/pair"].get<int64_t>()),
                  layout.c_str(), autoRow["algorithm"].get<std::string>().c_str(), bestName.c_str(),
                  autoRow["us"].get<double>() / best);
    lines.push_back(text);
  }
  report.note("auto vs best forced", lines);
}

void runAlltoall(const BenchOptions& options, const CommonOptions& common) {
  Report report("alltoall: MPI_Alltoall semantics, N ranks on this host; time per alltoall (slowest rank), "
                "contig = bytes, vector = 8 B pieces every 16 B received contiguous",
                {"ranks", "bytes/pair", "row", "algorithm", "us", "us CI low", "us CI high", "us min", "us max",
                 "dropped", "ctx sw/call", "invol sw/call", "plan us", "MB/s per rank"});
  Setup setup;
  setup.quick = common.quick;
  setup.bytes = options.bytes.empty() ? alltoallBytes(common.quick) : options.bytes;
  setup.reps = common.quick ? 3 : std::max(common.reps, kAlltoallMinReps);
  // Warm up like OSU's benchmarks (hundreds of untimed iterations), not 3
  // repetitions: caches, the registration cache and the MPI library's own
  // first-touch costs (ibdt's eager buffers arrive faulted in, docs/design.md
  // "Fabric"). Both libraries get the same.
  setup.warmup = common.quick ? 1 : std::max(common.warmup, kAlltoallWarmupReps);
  const std::vector<int> rankCounts = options.ranks.empty() ? alltoallRanks() : options.ranks;
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  for (int ranks : rankCounts) {
    if (wanted(options, "ibdt contig") || wanted(options, "ibdt vector")) {
      const std::string jobTag = "alltoall-bench-" + std::to_string(getpid()) + "-" + std::to_string(ranks);
      runForkedRanks("alltoall", ranks, [&](messaging::Bootstrap& bootstrap) {
        return runIbdtRank(bootstrap, options, setup, jobTag, report);
      });
    }
    if (wanted(options, kMemcpyRow)) runMemcpy(ranks, setup, report);
    for (const MpiLibrary& library : mpiLibraries()) runMpi(library, ranks, options, setup, report);
    if (ranks > cores) {
      report.note("oversubscribed at " + std::to_string(ranks) + " ranks",
                  std::to_string(ranks) + " ranks share " + std::to_string(cores) +
                      " cores, unbound: times include waiting for a core (ibdt ranks yield after every "
                      "empty poll, base/backoff.h)");
    }
  }
  for (const char* name : kMpiLibraryNames) {
    const bool built = std::any_of(mpiLibraries().begin(), mpiLibraries().end(),
                                   [&](const MpiLibrary& library) { return library.name == name; });
    if (!built) report.note(name, "not measured: ibdt-bench was built without it (its compiler wrapper was not found)");
  }
  AlltoallOptions defaults;
  auto fromEnvironment = collectives::alltoallOptionsFromEnvironment();
  if (fromEnvironment.isOk()) defaults = *fromEnvironment;
  if (options.compareAuto) noteAutoAgainstForced(report);
  report.note("statistics", "per row: " + std::to_string(setup.reps) + " timed repetitions (" +
                                std::to_string(alltoallRepsFor(8, setup.reps)) +
                                " for blocks <= 512 B), each a barrier then several alltoalls; the slowest rank's time "
                                "per alltoall; Tukey's filter drops repetitions above Q3 + 1.5 IQR (dropped); us is "
                                "the median of the rest, CI its 95 % confidence interval (order statistics)");
  report.note("ctx sw/call", "voluntary context switches (getrusage ru_nvcsw) per alltoall over the timed "
                             "repetitions, the most of any rank; invol sw/call: involuntary ones (ru_nivcsw: "
                             "preempted, or gave the core away by sched_yield while runnable)");
  report.note("plan us", "plan creation alone (alltoallInit + destroy, no run started), median of 20, slowest rank; "
                         "MPI persistent rows: MPIX_Alltoall_init + MPI_Request_free");
  report.note("ibdt", "auto = the cost-model choice (docs/alltoall-selection.md; column algorithm); persistent: one plan "
                     "started per call, blocking: alltoall() per call; pairwise throttle " +
                          std::to_string(options.throttle >= 0 ? options.throttle : defaults.throttle) +
                          " rounds in flight; forked ranks over the " + options.provider +
                          " provider, one core each where they fit (as mpirun binds), started by ibdt's barrier");
  if (options.nodes > 1) {
    report.note("ibdt hierarchical", "gather at " + std::to_string(defaults.leaders) +
                                       " leader(s) per node, exchange between the leaders (direct, at most the "
                                       "throttle's node pairs in flight, or Bruck; plain hierarchical: "
                                       "IBDT_ALLTOALL_LEADER_EXCHANGE), scatter, on " +
                                       std::to_string(options.nodes) +
                                       " simulated nodes (ranks in blocks); node-local traffic through the same provider");
  }
  report.note(kMemcpyRow, "one process copies the N blocks of one rank's receive buffer with memcpy (no transport)");
  report.note("MB/s per rank", "bytes each rank sends to the other ranks (memcpy: bytes it copies) per second");
  report.note("machine", machineDescription());
  for (int ranks : rankCounts) {
    report.plot({"p" + std::to_string(ranks), "alltoall, " + std::to_string(ranks) + " ranks (" + machineDescription() + ")",
                 "bytes/pair", "us", "row", "bytes per pair", "microseconds per alltoall", {{"ranks", ranks}}});
  }
  report.print(common);
}

}  // namespace

void addAlltoallBenchmark(CLI::App& app, const CommonOptions& common) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* sub = app.add_subcommand("alltoall", "alltoall algorithms among 2, 4, 8 forked ranks vs MPI_Alltoall and memcpy");
  sub->fallthrough();
  sub->add_option("--ranks", options->ranks, "rank counts (default 2, 4, 8)")->check(CLI::Range(2, 64));
  sub->add_option("--bytes", options->bytes, "bytes per pair, multiples of 8 (default 8, 64, 512, 4096, 65536)")
      ->check(CLI::Range(kAlltoallPiece, int64_t{1} << 24))
      ->check([](const std::string& text) {
        return std::stoll(text) % kAlltoallPiece == 0 ? std::string() : std::string("not a multiple of 8");
      });
  sub->add_option("--throttle", options->throttle, "rounds in flight (default IBDT_ALLTOALL_THROTTLE; 0: all)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  sub->add_option("--provider", options->provider, "fabric provider (auto, shm, verbs)");
  sub->add_option("--algorithm", options->algorithms,
                  "ibdt algorithms, repeatable (default auto): auto, pairwise, bruck-basic, bruck-modified, "
                  "bruck-zero-copy, bruck-radix-<r>, hierarchical (its leader exchange auto), "
                  "hierarchical-direct, hierarchical-bruck, direct-write, shared-memory")
      ->check([](const std::string& text) {
        auto parsed = algorithmOptions(text, AlltoallOptions{});
        return parsed.isOk() ? std::string() : parsed.status().toString();
      });
  sub->add_option("--mode", options->modes, "persistent and/or blocking, repeatable (default persistent)")
      ->check(CLI::IsMember({"persistent", "blocking"}));
  sub->add_flag("--compare-auto", options->compareAuto,
               "run auto and every forced algorithm (pairwise, bruck-basic/modified/zero-copy, bruck-radix-3/4/8, "
               "direct-write; with --nodes, hierarchical, else shared-memory), "
               "persistent, and note auto's median over the best forced one's");
  sub->add_option("--nodes", options->nodes,
                  "simulate K nodes (ranks in blocks); without --algorithm, runs auto and hierarchical")
      ->check(CLI::Range(1, 64));
  std::vector<std::string> names = {"ibdt contig", "ibdt vector", kMemcpyRow};
  for (const char* library : kMpiLibraryNames) names.insert(names.end(), {rowName(library, false), rowName(library, true)});
  sub->add_option("--row", options->rows, "rows to run (default all)")->check(CLI::IsMember(names));
  sub->callback([options, &common] { runAlltoall(*options, common); });
}

}  // namespace ibdt::perf
