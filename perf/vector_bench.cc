// ibdt-bench vector — Wu/Wyckoff/Panda Section 6.2 between two processes
// (the bench forks its peer): x columns of a 128 x 4096 int array sent with
// vector(128, x, 4096, int), x = 1, 2, 4 ... 2048. Ping-pong latency (half
// round trip, Figure 6) and bandwidth with a window of 100 messages
// (Figure 7) for every scheme forced, the automatic choice, the same bytes
// contiguous (Contig) and packed by hand (Manual). --worst-case-registration
// gives every iteration fresh user buffers and turns pooling and the
// registration cache off (Figure 12); --list-post off posts one write at a
// time (Figure 11).
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ibdt/messaging.h"
#include "perf/benchmarks.h"
#include "perf/two_processes.h"

namespace ibdt::perf {
namespace {

using datatype::Datatype;
using messaging::Context;
using messaging::Request;
using messaging::Scheme;

constexpr int64_t kRows = 128;
constexpr int64_t kColumns = 4096;
constexpr int kWindow = 100;

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
      Result<Request> request = Status();
      bool contiguous = row.kind != Row::kVector;
      void* data = contiguous ? static_cast<void*>(buffers.packed.data()) : buffers.array.data();
      int64_t count = contiguous ? kRows * x : 1;
      const Datatype& type = contiguous ? Datatype::of<int32_t>() : vector;
      request = rank_ == 0 ? ctx_.isend(data, count, type, peer, 2) : ctx_.irecv(data, count, type, peer, 2);
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

Status runRank(int socket, int rank, const VectorOptions& options, const CommonOptions& common, Report& report) {
  if (options.worstCaseRegistration) {
    setenv("IBDT_REG_CACHE", "off", 1);
    setenv("IBDT_POOL_HIGH_WATER", "0", 1);
  }
  messaging::Bootstrap bootstrap = socketBootstrap(socket, rank);
  // The job tag: the parent's pid, the same on both sides.
  std::string tag = "vector-bench-" + std::to_string(rank == 0 ? getpid() : getppid());
  IBDT_ASSIGN_OR_RETURN(auto domain, fabric::openDomain(options.provider, {tag, ""}));
  std::vector<int64_t> columns;
  for (int64_t x = 1; x <= 2048; x *= 2) {
    if (!common.quick || x == 1 || x == 16 || x == 256 || x == 2048) columns.push_back(x);
  }
  if (!options.columns.empty()) columns = options.columns;
  int reps = common.quick ? 3 : common.reps;
  int warmup = common.quick ? 1 : common.warmup;
  for (const Row& row : kRowsToRun) {
    if (!options.rows.empty() && std::find(options.rows.begin(), options.rows.end(), row.name) == options.rows.end()) {
      continue;
    }
    auto messaging = messaging::optionsFromEnvironment();
    if (!messaging.isOk()) return messaging.status();
    messaging->forcedScheme = row.scheme;
    messaging->listPost = options.listPost != "off";
    IBDT_ASSIGN_OR_RETURN(auto context, Context::create(*domain, bootstrap, *messaging));
    Runner runner(*context, rank, options);
    // Before this context goes: a last message each way (so everything sent
    // earlier has arrived), then both sides agree through the socket.
    struct Quiesce {
      Context& ctx;
      messaging::Bootstrap& bootstrap;
      int rank;
      ~Quiesce() {
        int32_t token = rank, got = -1;
        auto in = ctx.irecv(&got, 1, Datatype::of<int32_t>(), 1 - rank, 4);
        Status sent = ctx.send(&token, 1, Datatype::of<int32_t>(), 1 - rank, 4);
        if (in.isOk() && sent.isOk()) (void)ctx.wait(*in);
        (void)bootstrap.allgather({});
      }
    } quiesce{*context, bootstrap, rank};
    for (int64_t x : columns) {
      IBDT_ASSIGN_OR_RETURN(Datatype vector, Datatype::vector(kRows, x, kColumns, Datatype::of<int32_t>()));
      IBDT_RETURN_IF_ERROR(vector.commit());
      Buffers buffers;
      buffers.array.assign(static_cast<size_t>(kRows * kColumns), rank);
      buffers.packed.assign(static_cast<size_t>(kRows * x), rank);
      messaging::Counters before = context->counters();
      Status failed;
      int inner = x <= 64 ? 20 : 4;
      auto latency = measure(warmup, reps, inner, [&] {
        Status s = runner.pingPong(row, x, vector, buffers);
        if (failed.isOk() && !s.isOk()) failed = s;
      });
      IBDT_RETURN_IF_ERROR(failed);
      auto bandwidth = measure(warmup, reps, 1, [&] {
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
      Summary lat = summarize(latency);
      Summary bw = summarize(bandwidth);
      double bytes = static_cast<double>(kRows * x * 4);
      report.add({{"x", x},
                  {"bytes", kRows * x * 4},
                  {"row", row.name},
                  {"carried by", chosen},
                  {"latency us", lat.median / 2 * 1e6},
                  {"lat min", lat.min / 2 * 1e6},
                  {"lat max", lat.max / 2 * 1e6},
                  {"MB/s", kWindow * bytes / bw.median / 1e6},
                  {"MB/s min", kWindow * bytes / bw.max / 1e6},
                  {"MB/s max", kWindow * bytes / bw.min / 1e6}});
    }
  }
  return Status::ok();
}

void runVector(const VectorOptions& options, const CommonOptions& common) {
  Report report("vector: 128 x 4096 int, x columns (Wu/Wyckoff/Panda 6.2); latency = half round trip, "
                "bandwidth = window of 100",
                {"x", "bytes", "row", "carried by", "latency us", "lat min", "lat max", "MB/s", "MB/s min",
                 "MB/s max"});
  runTwoProcesses("vector", [&](int socket, int rank) { return runRank(socket, rank, options, common, report); });
  report.note("machine", machineDescription());
  report.note("worst-case registration", options.worstCaseRegistration);
  report.note("list post", options.listPost);
  report.note("Open MPI", "not measured by this bench (ibdt-bench does not link MPI)");
  report.print(common);
}

}  // namespace

void addVectorBenchmark(CLI::App& app, const CommonOptions& common) {
  auto options = std::make_shared<VectorOptions>();
  CLI::App* sub = app.add_subcommand("vector", "Wu/Wyckoff/Panda vector ping-pong and window bandwidth, every scheme");
  sub->add_flag("--worst-case-registration", options->worstCaseRegistration,
                "fresh user buffers each iteration, no pool reuse, no registration cache (Figure 12)");
  sub->add_option("--list-post", options->listPost, "on: chained write lists; off: one post per write (Figure 11)")
      ->check(CLI::IsMember({"on", "off"}));
  sub->add_option("--provider", options->provider, "fabric provider (auto, shm, verbs)");
  sub->add_option("--x", options->columns, "column counts to run (default 1, 2, 4 ... 2048)")
      ->check(CLI::Range(int64_t{1}, kColumns));
  std::vector<std::string> names;
  for (const Row& row : kRowsToRun) names.emplace_back(row.name);
  sub->add_option("--row", options->rows, "rows to run (default all)")->check(CLI::IsMember(names));
  sub->callback([options, &common] { runVector(*options, common); });
}

}  // namespace ibdt::perf
