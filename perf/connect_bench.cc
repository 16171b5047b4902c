// ibdt-bench connect — what connecting eagerly or lazily costs between two
// processes (the bench forks its peer): Context::create(), the first 8-byte
// ping-pong (lazily it includes setting up the endpoint pair through the
// listeners), an 8-byte ping-pong on the connected pair (the baseline), and
// close(). Every repetition creates and closes a fresh Context; every
// message is checked.
#include <unistd.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "ibdt/messaging.h"
#include "perf/benchmarks.h"
#include "perf/forked_ranks.h"
#include "perf/idle_peers.h"

namespace ibdt::perf {
namespace {

using datatype::Datatype;
using messaging::Connect;
using messaging::Context;

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

using Samples = std::map<std::string, std::vector<double>>;

Status runRank(messaging::Bootstrap& bootstrap, const std::string& jobTag, const std::string& provider,
               int repetitions, Samples& samples) {
  const int rank = bootstrap.rank;
  IBDT_ASSIGN_OR_RETURN(auto domain, fabric::openDomain(provider, {jobTag, ""}));
  constexpr int kSteady = 200;
  for (int rep = 0; rep < repetitions; ++rep) {
    for (Connect connect : {Connect::kEager, Connect::kLazy}) {
      std::string mode = connect == Connect::kEager ? "eager" : "lazy";
      messaging::Options options;
      options.connect = connect;
      IBDT_RETURN_IF_ERROR(bootstrap.allgather({}).status());  // start together
      auto start = std::chrono::steady_clock::now();
      IBDT_ASSIGN_OR_RETURN(auto context, Context::create(*domain, bootstrap, options));
      samples["create() " + mode].push_back(secondsSince(start));
      start = std::chrono::steady_clock::now();
      IBDT_RETURN_IF_ERROR(pingPong8(*context, rank, 0));
      samples["first 8 B ping-pong, " + mode].push_back(secondsSince(start) / 2);
      start = std::chrono::steady_clock::now();
      for (int i = 1; i <= kSteady; ++i) IBDT_RETURN_IF_ERROR(pingPong8(*context, rank, i));
      samples["8 B ping-pong once connected, " + mode].push_back(secondsSince(start) / kSteady / 2);
      start = std::chrono::steady_clock::now();
      IBDT_RETURN_IF_ERROR(context->close());
      samples["close() " + mode].push_back(secondsSince(start));
      if (context->counters().connections != 1) {
        return makeError(Code::kInternal, "connect bench: ", context->counters().connections, " connections");
      }
    }
  }
  return Status::ok();
}

void run(const CommonOptions& common, const std::string& provider) {
  int warmup = common.quick ? 1 : common.warmup;
  int reps = common.quick ? 3 : common.reps;
  Samples samples;
  const std::string jobTag = "connect-bench-" + std::to_string(getpid());  // rank 0's pid: one per run
  bool ok = runForkedRanks("connect", 2, [&](messaging::Bootstrap& bootstrap) {
    Samples mine;
    Status status = runRank(bootstrap, jobTag, provider, warmup + reps, mine);
    if (bootstrap.rank == 0) samples = std::move(mine);
    return status;
  });
  if (!ok) return;
  Report report("connect: eager vs lazy endpoint set-up, 2 processes (µs; half round trip for ping-pongs)",
                {"case", "median", "min", "max"});
  for (const char* name :
       {"create() eager", "create() lazy", "first 8 B ping-pong, eager", "first 8 B ping-pong, lazy",
        "8 B ping-pong once connected, eager", "8 B ping-pong once connected, lazy", "close() eager",
        "close() lazy"}) {
    std::vector<double> timed(samples[name].begin() + warmup, samples[name].end());
    Summary summary = summarize(std::move(timed));
    report.add({{"case", name}, {"median", summary.median * 1e6}, {"min", summary.min * 1e6},
                {"max", summary.max * 1e6}});
  }
  report.note("machine", machineDescription());
  report.note("provider", provider);
  report.note("repetitions", reps);
  report.note("create", "includes the cost model's memcpy timing (8 MiB) in both modes");
  report.print(common);
}

}  // namespace

void addConnectBenchmark(CLI::App& app, const CommonOptions& common) {
  auto* command = app.add_subcommand("connect", "eager vs lazy connection: create(), first message, close()");
  command->fallthrough();  // `ibdt-bench connect ... --json` as well as `ibdt-bench --json connect ...`
  static std::string provider = "auto";
  command->add_option("--provider", provider, "fabric provider (auto, shm, verbs)");
  static IdlePeersOptions idle;
  command->add_option("--idle-peers", idle.ranks,
                      "instead: 8 B ping-pong of 2 ranks in eagerly connected jobs of these sizes (the others idle), "
                      "and the memory an all-to-all of 32 KiB blocks touches per rank")
      ->delimiter(',')
      ->check(CLI::Range(2, 1024));
  command->add_option("--alltoall-rounds", idle.rounds, "with --idle-peers: all-to-all rounds before memory is read")
      ->check(CLI::Range(1, 1000));
  command->add_option("--pingpong-bytes", idle.pingPongBytes, "with --idle-peers: ping-pong message size (multiple of 8)")
      ->check(CLI::Range(int64_t{8}, int64_t{1} << 24))
      ->check([](const std::string& text) { return std::stoll(text) % 8 == 0 ? "" : "not a multiple of 8"; });
  command->callback([&common] {
    if (idle.ranks.empty()) return run(common, provider);
    idle.provider = provider;
    runIdlePeers(common, idle);
  });
}

Status pingPong(messaging::Context& context, int rank, int64_t round, std::span<int64_t> out, std::span<int64_t> in) {
  const int peer = 1 - rank;
  const int64_t words = static_cast<int64_t>(out.size());
  for (int64_t i = 0; i < words; ++i) out[static_cast<size_t>(i)] = (round * 2 + rank) * 7919 + i;
  if (rank == 0) {
    IBDT_RETURN_IF_ERROR(context.send(out.data(), words, Datatype::of<int64_t>(), peer, 1));
    IBDT_RETURN_IF_ERROR(context.recv(in.data(), words, Datatype::of<int64_t>(), peer, 1));
  } else {
    IBDT_RETURN_IF_ERROR(context.recv(in.data(), words, Datatype::of<int64_t>(), peer, 1));
    IBDT_RETURN_IF_ERROR(context.send(out.data(), words, Datatype::of<int64_t>(), peer, 1));
  }
  for (int64_t i = 0; i < words; ++i) {
    if (in[static_cast<size_t>(i)] != (round * 2 + peer) * 7919 + i) {
      return makeError(Code::kInternal, "ping-pong: round ", round, " word ", i, " got ", in[static_cast<size_t>(i)]);
    }
  }
  return Status::ok();
}

Status pingPong8(messaging::Context& context, int rank, int64_t round) {
  int64_t out = 0, in = -1;
  return pingPong(context, rank, round, std::span(&out, 1), std::span(&in, 1));
}

}  // namespace ibdt::perf
