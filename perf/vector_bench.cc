// ibdt-bench vector — Wu/Wyckoff/Panda Section 6.2 between two processes
// (the bench forks its peer): x columns of a 128 x 4096 int array sent with
// vector(128, x, 4096, int), x = 1, 2, 4 ... 2048. Ping-pong latency (half
// round trip, Figure 6) and bandwidth with a window of 100 messages
// (Figure 7) for every scheme forced, the automatic choice, the same bytes
// contiguous (Contig) and packed by hand (Manual). --worst-case-registration
// gives every iteration fresh user buffers and turns pooling and the
// registration cache off (Figure 12); --list-post off posts one write at a
// time (Figure 11). The same experiment with MPI_Type_vector under Open MPI
// and MPICH (perf/mpi_vector_baseline.cc) runs after the ibdt rows, into the
// same table, followed by the targets computed from the rows.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ibdt/messaging.h"
#include "perf/benchmarks.h"
#include "perf/forked_ranks.h"
#include "perf/mpi_baseline_runner.h"
#include "perf/vector_cases.h"
#include "perf/vector_shared_memcpy.h"
#include "perf/vector_targets.h"

namespace ibdt::perf {
namespace {

using datatype::Datatype;
using messaging::Context;
using messaging::Request;
using messaging::Scheme;

constexpr int64_t kRows = kVectorRows;
constexpr int64_t kColumns = kVectorColumns;
constexpr int kWindow = kVectorWindow;

struct VectorOptions {
  bool worstCaseRegistration = false;
  std::string listPost = "on";
  std::string provider = "auto";
  std::vector<int64_t> columns;    // empty: 1, 2, 4 ... 2048
  std::vector<std::string> rows;   // empty: every row
};

struct Row {
  const char* name;
  Scheme scheme;  // forced (kAuto for auto, Contig, Manual)
  enum Kind { kVector, kContig, kManual } kind;
};

const Row kRowsToRun[] = {
    {"Generic", Scheme::kGeneric, Row::kVector}, {"BC-SPUP", Scheme::kBcSpup, Row::kVector},
    {"RWG-UP", Scheme::kRwgUp, Row::kVector},    {"P-RRS", Scheme::kPRrs, Row::kVector},
    {"Multi-W", Scheme::kMultiW, Row::kVector},  {"auto", Scheme::kAuto, Row::kVector},
    {"Contig", Scheme::kAuto, Row::kContig},     {"Manual", Scheme::kAuto, Row::kManual},
};

// The MPI rows (perf/mpi_vector_baseline.cc): "<library>" and "<library> contig".
constexpr const char* kMpiLibraryNames[] = {"Open MPI", "MPICH"};

bool wanted(const VectorOptions& options, const std::string& row) {
  return options.rows.empty() || std::find(options.rows.begin(), options.rows.end(), row) != options.rows.end();
}

// What every row runs: the same sizes, repetitions and warm-up.
struct Plan {
  std::vector<int64_t> columns;
  int reps = 0;
  int warmup = 0;
  bool quick = false;
};

// One rank's buffers for one x.
struct Buffers {
  std::vector<int32_t> array;   // the 128 x 4096 matrix
  std::vector<int32_t> packed;  // Contig / Manual
};

class Runner {
 public:
  Runner(Context& context, int rank, const VectorOptions& options) : ctx_(context), rank_(rank), options_(options) {}

  // One message of the row's kind from `from` to the other rank.
  Status transfer(const Row& row, int64_t x, const Datatype& vector, Buffers& buffers, bool sending, int tag) {
    int peer = 1 - rank_;
    int64_t elements = kRows * x;
    switch (row.kind) {
      case Row::kVector:
        return sending ? ctx_.send(buffers.array.data(), 1, vector, peer, tag)
                       : ctx_.recv(buffers.array.data(), 1, vector, peer, tag);
      case Row::kContig:
        return sending ? ctx_.send(buffers.packed.data(), elements, Datatype::of<int32_t>(), peer, tag)
                       : ctx_.recv(buffers.packed.data(), elements, Datatype::of<int32_t>(), peer, tag);
      case Row::kManual:
        if (sending) {
          for (int64_t r = 0; r < kRows; ++r) {
            std::memcpy(buffers.packed.data() + r * x, buffers.array.data() + r * kColumns, x * sizeof(int32_t));
          }
          return ctx_.send(buffers.packed.data(), elements, Datatype::of<int32_t>(), peer, tag);
        } else {
          IBDT_RETURN_IF_ERROR(ctx_.recv(buffers.packed.data(), elements, Datatype::of<int32_t>(), peer, tag));
          for (int64_t r = 0; r < kRows; ++r) {
            std::memcpy(buffers.array.data() + r * kColumns, buffers.packed.data() + r * x, x * sizeof(int32_t));
          }
          return Status::ok();
        }
    }
    return Status::ok();
  }

  // One checked message from rank 0 to rank 1, both sides' buffers patterned
  // first: rank 1 checks every int of its buffer (the sent columns and that
  // nothing else changed) and tells rank 0, so both fail together.
  Status check(const Row& row, int64_t x, const Datatype& vector, Buffers& buffers) {
    fillVectorPattern(buffers.array, rank_);
    fillContigPattern(buffers.packed, x, rank_);
    IBDT_RETURN_IF_ERROR(transfer(row, x, vector, buffers, rank_ == 0, 5));
    std::string wrong;
    if (rank_ == 1) {
      wrong = row.kind == Row::kContig ? checkContig(buffers.packed, x, 0) : checkVectorColumns(buffers.array, x, 0, 1);
    }
    int32_t bad = wrong.empty() ? 0 : 1;
    IBDT_RETURN_IF_ERROR(rank_ == 1 ? ctx_.send(&bad, 1, Datatype::of<int32_t>(), 1 - rank_, 6)
                                    : ctx_.recv(&bad, 1, Datatype::of<int32_t>(), 1 - rank_, 6));
    if (bad == 0) return Status::ok();
    return makeError(Code::kInternal, row.name, ": wrong data received",
                     wrong.empty() ? " (see rank 1)" : ": " + wrong);
  }

  Status pingPong(const Row& row, int64_t x, const Datatype& vector, Buffers& buffers) {
    std::unique_ptr<Buffers> fresh;
    Buffers* use = &buffers;
    if (options_.worstCaseRegistration) {  // the paper's worst case: new user buffers every time
      fresh = std::make_unique<Buffers>();
      fresh->array.assign(static_cast<size_t>(kRows * kColumns), rank_);
      fresh->packed.assign(static_cast<size_t>(kRows * x), rank_);
      use = fresh.get();
    }
    IBDT_RETURN_IF_ERROR(transfer(row, x, vector, *use, rank_ == 0, 1));
    return transfer(row, x, vector, *use, rank_ == 1, 1);
  }

  Status window(const Row& row, int64_t x, const Datatype& vector, Buffers& buffers) {
    int peer = 1 - rank_;
    std::vector<Request> requests;
    requests.reserve(kWindow);
    for (int i = 0; i < kWindow; ++i) {
      bool contiguous = row.kind != Row::kVector;
      void* data = contiguous ? static_cast<void*>(buffers.packed.data()) : buffers.array.data();
      int64_t count = contiguous ? kRows * x : 1;
      const Datatype& type = contiguous ? Datatype::of<int32_t>() : vector;
      // Made in place: a placeholder error Status would cost an allocation per message timed.
      Result<Request> request =
          rank_ == 0 ? ctx_.isend(data, count, type, peer, 2) : ctx_.irecv(data, count, type, peer, 2);
      if (!request.isOk()) return request.status();
      requests.push_back(std::move(*request));
    }
    IBDT_RETURN_IF_ERROR(ctx_.waitAll(requests));
    int32_t ack = 0;
    return rank_ == 1 ? ctx_.send(&ack, 1, Datatype::of<int32_t>(), peer, 3)
                      : ctx_.recv(&ack, 1, Datatype::of<int32_t>(), peer, 3);
  }

 private:
  Context& ctx_;
  int rank_;
  const VectorOptions& options_;
};

// One (row, x) result: round trip and window times in seconds.
void addRow(Report& report, int64_t x, const std::string& row, const std::string& carriedBy, const Summary& roundTrip,
            const Summary& window) {
  const double bytes = static_cast<double>(vectorBytes(x));
  report.add({{"x", x},
              {"bytes", vectorBytes(x)},
              {"row", row},
              {"carried by", carriedBy},
              {"latency us", roundTrip.median / 2 * 1e6},
              {"lat min", roundTrip.min / 2 * 1e6},
              {"lat max", roundTrip.max / 2 * 1e6},
              {"MB/s", kWindow * bytes / window.median / 1e6},
              {"MB/s min", kWindow * bytes / window.max / 1e6},
              {"MB/s max", kWindow * bytes / window.min / 1e6}});
}

Status runRank(messaging::Bootstrap& bootstrap, const std::string& jobTag, const VectorOptions& options,
               const Plan& plan, Report& report) {
  const int rank = bootstrap.rank;
  if (options.worstCaseRegistration) {
    setenv("IBDT_REG_CACHE", "off", 1);
    setenv("IBDT_POOL_HIGH_WATER", "0", 1);
  }
  IBDT_ASSIGN_OR_RETURN(auto domain, fabric::openDomain(options.provider, {jobTag, ""}));
  for (const Row& row : kRowsToRun) {
    if (!wanted(options, row.name)) continue;
    auto messaging = messaging::optionsFromEnvironment();
    if (!messaging.isOk()) return messaging.status();
    messaging->forcedScheme = row.scheme;
    messaging->listPost = options.listPost != "off";
    IBDT_ASSIGN_OR_RETURN(auto context, Context::create(*domain, bootstrap, *messaging));
    Runner runner(*context, rank, options);
    // Before this context goes: close() returns once the peer closed too, so
    // nothing either side sent is still on its way.
    struct Quiesce {
      Context& ctx;
      ~Quiesce() { (void)ctx.close(Deadline::after(std::chrono::seconds(30))); }
    } quiesce{*context};
    for (int64_t x : plan.columns) {
      IBDT_ASSIGN_OR_RETURN(Datatype vector, Datatype::vector(kRows, x, kColumns, Datatype::of<int32_t>()));
      IBDT_RETURN_IF_ERROR(vector.commit());
      Buffers buffers;
      IBDT_RETURN_IF_ERROR(runner.check(row, x, vector, buffers));
      messaging::Counters before = context->counters();
      Status failed;
      auto latency = measure(plan.warmup, plan.reps, vectorPingPongsPerRep(x), [&] {
        Status s = runner.pingPong(row, x, vector, buffers);
        if (failed.isOk() && !s.isOk()) failed = s;
      });
      IBDT_RETURN_IF_ERROR(failed);
      auto bandwidth = measure(plan.warmup, plan.reps, 1, [&] {
        Status s = runner.window(row, x, vector, buffers);
        if (failed.isOk() && !s.isOk()) failed = s;
      });
      IBDT_RETURN_IF_ERROR(failed);
      if (rank != 0) continue;
      // Which scheme carried the messages (the auto row's choice).
      const messaging::Counters& after = context->counters();
      std::string chosen;
      for (int s = 0; s < messaging::kSchemeCount; ++s) {
        if (after.schemeCount[s] != before.schemeCount[s]) {
          chosen += (chosen.empty() ? "" : "+") + std::string(messaging::schemeName(static_cast<Scheme>(s)));
        }
      }
      addRow(report, x, row.name, chosen, summarize(latency), summarize(bandwidth));
    }
  }
  return Status::ok();
}

// The same experiment with MPI_Type_vector (and contiguous MPI_INT), two
// ranks under the library's own launcher, into the same table.
void runMpiRows(const MpiLibrary& library, const VectorOptions& options, const Plan& plan, Report& report) {
  const std::string contigRow = library.name + " contig";
  const bool vector = wanted(options, library.name), contig = wanted(options, contigRow);
  if (!vector && !contig) return;
  std::string columns;
  for (int64_t x : plan.columns) columns += (columns.empty() ? "" : ",") + std::to_string(x);
  const std::vector<std::string> args = {"--x", columns, "--reps", std::to_string(plan.reps), "--warmup",
                                         std::to_string(plan.warmup), "--rows",
                                         std::string(vector ? "vector" : "") + (contig ? ",contig" : "")};
  // Generous: the full run takes well under a minute on an idle machine.
  for (const nlohmann::json& line : runMpiRows(library, library.vectorProgram, 2, args,
                                               std::chrono::seconds(plan.quick ? 300 : 1200), report, library.name,
                                               " (one rank per core)")) {
    const bool isContig = line["row"] == "contig";
    addRow(report, line["x"].get<int64_t>(), isContig ? contigRow : library.name,
           isContig ? "MPI_INT contiguous" : "MPI_Type_vector", summaryOf(line["round_trip"]),
           summaryOf(line["window"]));
  }
}

constexpr const char* kSharedMemcpyRow = "shared memcpy";

void runSharedMemcpy(const VectorOptions& options, const Plan& plan, Report& report) {
  if (!wanted(options, kSharedMemcpyRow)) return;
  for (int64_t x : plan.columns) {
    auto measured = measureSharedMemcpy(x, plan.warmup, plan.reps, vectorPingPongsPerRep(x));
    if (!measured.isOk()) {
      reportFailure(measured.status().toString());
      return;
    }
    addRow(report, x, kSharedMemcpyRow, "one memcpy per row, shared arrays", measured->roundTrip, measured->window);
  }
  report.note(kSharedMemcpyRow, "the memcpy baseline: both arrays shared, the sender copies its columns straight into the "
                             "peer's (one copy, one core), handing over by a flag the peer spins on (no "
                             "registration, matching or handshake); small x show the cross-core handoff, and a "
                             "pipelined copy through a shared buffer, both cores working, can beat it at large x");
}

void runVector(const VectorOptions& options, const CommonOptions& common) {
  Report report("vector: 128 x 4096 int, x columns (Wu/Wyckoff/Panda 6.2); latency = half round trip, "
                "bandwidth = window of 100",
                {"x", "bytes", "row", "carried by", "latency us", "lat min", "lat max", "MB/s", "MB/s min",
                 "MB/s max"});
  Plan plan;
  plan.quick = common.quick;
  plan.columns = options.columns.empty() ? vectorColumnCounts(common.quick) : options.columns;
  plan.reps = common.quick ? 3 : common.reps;
  plan.warmup = common.quick ? 1 : common.warmup;
  if (std::any_of(std::begin(kRowsToRun), std::end(kRowsToRun), [&](const Row& r) { return wanted(options, r.name); })) {
    const std::string jobTag = "vector-bench-" + std::to_string(getpid());  // rank 0's pid: one per run
    runForkedRanks("vector", 2, [&](messaging::Bootstrap& bootstrap) {
      return runRank(bootstrap, jobTag, options, plan, report);
    });
    report.note("ibdt ranks", std::string("two forked processes, ") +
                                  (ranksFitCores(2) ? "one core each (as mpirun binds two ranks)"
                                                    : "unbound (fewer than two cores allowed)") +
                                  "; they yield and nap when a wait lasts (base/backoff.h), so a loaded machine "
                                  "costs them more than MPI ranks polling on their own cores");
  }
  runSharedMemcpy(options, plan, report);
  for (const MpiLibrary& library : mpiLibraries()) runMpiRows(library, options, plan, report);
  for (const char* name : kMpiLibraryNames) {
    const bool built = std::any_of(mpiLibraries().begin(), mpiLibraries().end(),
                                   [&](const MpiLibrary& library) { return library.name == name; });
    if (!built && (wanted(options, name) || wanted(options, std::string(name) + " contig"))) {
      report.note(name, "not measured: ibdt-bench was built without it (its compiler wrapper was not found)");
    }
  }
  report.note("machine", machineDescription());
  report.note("worst-case registration", options.worstCaseRegistration);
  report.note("list post", options.listPost);
  if (options.worstCaseRegistration || options.listPost == "off") {
    report.note("MPI rows", "MPI runs its defaults: --worst-case-registration and --list-post apply to ibdt rows only");
  }
  report.plot({"latency", "vector ping-pong: half round trip (" + machineDescription() + ")", "bytes", "latency us",
               "row", "message bytes (x columns x 512)", "microseconds"});
  report.plot({"bandwidth", "vector: bandwidth, window of 100 (" + machineDescription() + ")", "bytes", "MB/s", "row",
               "message bytes", "MB/s"});
  VectorTargets targets = vectorTargets(report.rows());
  if (common.json) {  // one JSON document: the targets go in as notes
    report.note("targets", targets.table.rows());
    report.note("targets summary", targets.summary);
    report.print(common);
  } else {
    report.print(common);
    targets.table.print(common);
  }
}

}  // namespace

void addVectorBenchmark(CLI::App& app, const CommonOptions& common) {
  auto options = std::make_shared<VectorOptions>();
  CLI::App* sub = app.add_subcommand("vector", "Wu/Wyckoff/Panda vector ping-pong and window bandwidth, every scheme");
  sub->fallthrough();  // `ibdt-bench vector --quick --json` as well as `ibdt-bench --quick --json vector`
  sub->add_flag("--worst-case-registration", options->worstCaseRegistration,
                "fresh user buffers each iteration, no pool reuse, no registration cache (Figure 12)");
  sub->add_option("--list-post", options->listPost, "on: chained write lists; off: one post per write (Figure 11)")
      ->check(CLI::IsMember({"on", "off"}));
  sub->add_option("--provider", options->provider, "fabric provider (auto, shm, verbs)");
  sub->add_option("--x", options->columns, "column counts to run (default 1, 2, 4 ... 2048)")
      ->check(CLI::Range(int64_t{1}, kColumns));
  std::vector<std::string> names;
  for (const Row& row : kRowsToRun) names.emplace_back(row.name);
  names.emplace_back(kSharedMemcpyRow);
  for (const char* library : kMpiLibraryNames) names.insert(names.end(), {library, std::string(library) + " contig"});
  sub->add_option("--row", options->rows, "rows to run (default all; the MPI rows need their library)")->check(CLI::IsMember(names));
  sub->callback([options, &common] { runVector(*options, common); });
}

}  // namespace ibdt::perf
