// ibdt-bench connect --idle-peers — what many connected ranks cost the two
// that talk (issue 16, docs/many-ranks.md). For each job size N the bench
// forks N ranks that connect eagerly; then
//   * ranks 0 and 1 ping-pong 8 bytes while the N - 2 others idle, blocked
//     in a socket read (no CPU: the 2 talking ranks keep the cores), so the
//     difference to N = 2 is what every connected peer adds to progress;
//   * rank 0 times Context::progress() with nothing to do (idle progress);
//   * every rank sends a 32 KiB block to every other (an all-to-all of
//     eager-sized messages, every byte checked) and reports how much its
//     resident memory grew (smaps_rollup Rss and Pss; the user buffers are
//     touched beforehand, so the growth is the eager buffers the exchange
//     touched, Pss sharing the segments both sides map between them).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "ibdt/messaging.h"
#include "perf/benchmarks.h"
#include "perf/forked_ranks.h"
#include "perf/idle_peers.h"
#include "transport/messaging/eager_budget.h"
#include "transport/messaging/wire.h"

namespace ibdt::perf {
namespace {

using datatype::Datatype;
using messaging::Context;

constexpr int kRoundTrips = 200;    // per timed repetition
constexpr int kIdleProgressCalls = 500;     // per batch
constexpr int kIdleProgressBatches = 40;   // per timed repetition
constexpr int64_t kBlock = 32768;   // all-to-all block: the default eager limit

// The eager credits per peer and eager limit a Context of `ranks` gets with
// the default options and IBDT_MSG_EAGER_MEMORY as set (the same rule,
// eager_budget.h).
// Under IBDT_MSG_EAGER_POOL the credits are each peer's guaranteed share.
messaging::EagerShape eagerShapeOf(int ranks) {
  messaging::Options defaults;
  auto budget = messaging::eagerBudgetFromEnvironment();
  uint64_t bytes = budget.isOk() ? *budget : 0;
  messaging::EagerShape shape = messaging::eagerShapeWithin(bytes, defaults.eagerLimit, ranks, defaults.eagerCredits);
  auto pool = messaging::eagerPoolFromEnvironment();
  if (pool.isOk() && *pool && bytes != 0) {
    shape.credits = messaging::eagerPoolWithin(bytes, messaging::eagerSlotBytes(shape.eagerLimit), ranks,
                                               defaults.eagerCredits)
                        .guaranteed;
  }
  return shape;
}

struct Smaps {
  double rssKiB = 0;
  double pssKiB = 0;
  double pinnedKiB = 0;  // /proc/self/status VmPin: what the rank's registrations pin (verbs)
};

Smaps readSmaps() {
  Smaps out;
  FILE* file = std::fopen("/proc/self/smaps_rollup", "r");
  if (file == nullptr) return out;
  char line[256];
  while (std::fgets(line, sizeof line, file) != nullptr) {
    double value = 0;
    if (std::sscanf(line, "Rss: %lf kB", &value) == 1) out.rssKiB = value;
    if (std::sscanf(line, "Pss: %lf kB", &value) == 1) out.pssKiB = value;
  }
  std::fclose(file);
  if (FILE* status = std::fopen("/proc/self/status", "r")) {
    while (std::fgets(line, sizeof line, status) != nullptr) {
      double value = 0;
      if (std::sscanf(line, "VmPin: %lf kB", &value) == 1) out.pinnedKiB = value;
    }
    std::fclose(status);
  }
  return out;
}

Status barrier(messaging::Bootstrap& bootstrap) { return bootstrap.allgather({}).status(); }

uint8_t blockByte(int from, int to, int64_t at) { return static_cast<uint8_t>(from * 131 + to * 7 + at); }

// One all-to-all of kBlock bytes per pair; checks every received byte.
Status allToAll(Context& context, int rank, int size, std::vector<uint8_t>& send, std::vector<uint8_t>& recv) {
  std::vector<messaging::Request> requests;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    IBDT_ASSIGN_OR_RETURN(auto request, context.irecv(recv.data() + peer * kBlock, kBlock, Datatype::of<uint8_t>(),
                                                      peer, 7));
    requests.push_back(std::move(request));
  }
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    uint8_t* block = send.data() + peer * kBlock;
    for (int64_t i = 0; i < kBlock; ++i) block[i] = blockByte(rank, peer, i);
    IBDT_ASSIGN_OR_RETURN(auto request, context.isend(block, kBlock, Datatype::of<uint8_t>(), peer, 7));
    requests.push_back(std::move(request));
  }
  IBDT_RETURN_IF_ERROR(context.waitAll(requests));
  for (int peer = 0; peer < size; ++peer) {
    for (int64_t i = 0; peer != rank && i < kBlock; ++i) {
      if (recv[peer * kBlock + i] != blockByte(peer, rank, i)) {
        return makeError(Code::kInternal, "idle-peers bench: byte ", i, " from rank ", peer, " is wrong");
      }
    }
  }
  return Status::ok();
}

struct RankResult {
  std::vector<double> halfRoundTrip;  // seconds, rank 0 only
  std::vector<double> idleProgress;   // seconds per Context::progress() with nothing to do, rank 0 only
  std::vector<double> rssGrowth, pssGrowth, pinned, pssAfter;  // KiB, one per rank (rank 0 only)
};

Status runRank(messaging::Bootstrap& bootstrap, const IdlePeersOptions& options, int warmup, int reps,
               RankResult& result) {
  const int rank = bootstrap.rank, size = bootstrap.size;
  IBDT_ASSIGN_OR_RETURN(auto domain, fabric::openDomain(options.provider, {options.jobTag, ""}));
  messaging::Options contextOptions;
  contextOptions.connect = messaging::Connect::kEager;
  // Only ranks 0 and 1 run (the others sleep in a socket read): let them spin
  // as they would with a core each, so the rows differ by the provider's cost
  // per connected peer, not by the oversubscribed yield policy.
  contextOptions.spins = 4096;
  IBDT_ASSIGN_OR_RETURN(auto context, Context::create(*domain, bootstrap, contextOptions));
  IBDT_RETURN_IF_ERROR(barrier(bootstrap));
  if (rank < 2) {
    int64_t round = 0;
    std::vector<int64_t> out(static_cast<size_t>(options.pingPongBytes / 8)), in(out.size());
    for (int rep = 0; rep < warmup + reps; ++rep) {
      auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < kRoundTrips; ++i) IBDT_RETURN_IF_ERROR(pingPong(*context, rank, round++, out, in));
      std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
      if (rep >= warmup) result.halfRoundTrip.push_back(elapsed.count() / kRoundTrips / 2);
    }
  }
  IBDT_RETURN_IF_ERROR(barrier(bootstrap));  // the idle ranks slept in here
  if (rank == 0) {  // what a progress() with nothing to do costs, the others asleep
    // Each repetition keeps its fastest batch: on a loaded machine a batch
    // that lost the core to another process measures the scheduler.
    for (int rep = 0; rep < warmup + reps; ++rep) {
      double fastest = 1e9;
      for (int batch = 0; batch < kIdleProgressBatches; ++batch) {
        auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < kIdleProgressCalls; ++i) IBDT_RETURN_IF_ERROR(context->progress());
        std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
        fastest = std::min(fastest, elapsed.count() / kIdleProgressCalls);
      }
      if (rep >= warmup) result.idleProgress.push_back(fastest);
    }
  }
  IBDT_RETURN_IF_ERROR(barrier(bootstrap));
  std::vector<uint8_t> send(static_cast<size_t>(size * kBlock), 1), recv(static_cast<size_t>(size * kBlock), 1);
  Smaps before = readSmaps();
  for (int round = 0; round < options.rounds; ++round) IBDT_RETURN_IF_ERROR(allToAll(*context, rank, size, send, recv));
  Smaps after = readSmaps();
  double growth[4] = {after.rssKiB - before.rssKiB, after.pssKiB - before.pssKiB, after.pinnedKiB, after.pssKiB};
  IBDT_ASSIGN_OR_RETURN(auto all, bootstrap.allgather({reinterpret_cast<const uint8_t*>(growth), sizeof growth}));
  for (const auto& each : all) {
    if (each.size() != sizeof growth) return makeError(Code::kProtocol, "idle-peers bench: growth size");
    double theirs[4];
    std::memcpy(theirs, each.data(), sizeof theirs);
    result.rssGrowth.push_back(theirs[0]);
    result.pssGrowth.push_back(theirs[1]);
    result.pinned.push_back(theirs[2]);
    result.pssAfter.push_back(theirs[3]);
  }
  return context->close();
}

}  // namespace

void runIdlePeers(const CommonOptions& common, IdlePeersOptions options) {
  int warmup = common.quick ? 1 : common.warmup;
  int reps = common.quick ? 3 : common.reps;
  Report latency(strCat("idle peers: ", options.pingPongBytes,
                        " B ping-pong between ranks 0 and 1, the others connected and idle (µs, half round trip)"),
                 {"ranks", "median", "min", "max", "vs first size"});
  Report idle("idle peers progress: Context::progress() with nothing to do on rank 0, all N - 1 peers connected (ns)",
              {"ranks", "median", "min", "max"});
  Report memory("idle peers memory: resident growth per rank over an all-to-all of 32 KiB blocks (KiB)",
                {"ranks", "connected peers", "credits per peer", "eager limit", "Pss median", "Pss min", "Pss max", "Rss median",
                 "Rss max", "pinned median", "Pss after median"});
  double baseline = 0;
  for (int ranks : options.ranks) {
    RankResult result;
    options.jobTag = strCat("idle-peers-", getpid(), "-", ranks);
    bool ok = runForkedRanks("idle peers", ranks, [&](messaging::Bootstrap& bootstrap) {
      RankResult mine;
      Status status = runRank(bootstrap, options, warmup, reps, mine);
      if (bootstrap.rank == 0) result = std::move(mine);
      return status;
    });
    if (!ok) continue;
    Summary pingPong = summarize(result.halfRoundTrip);
    if (ranks == options.ranks.front()) baseline = pingPong.median;
    latency.add({{"ranks", ranks}, {"median", pingPong.median * 1e6}, {"min", pingPong.min * 1e6},
                 {"max", pingPong.max * 1e6}, {"vs first size", baseline > 0 ? pingPong.median / baseline : 0.0}});
    Summary progress = summarize(result.idleProgress);
    idle.add({{"ranks", ranks}, {"median", progress.median * 1e9}, {"min", progress.min * 1e9},
              {"max", progress.max * 1e9}});
    Summary pss = summarize(result.pssGrowth), rss = summarize(result.rssGrowth);
    const messaging::EagerShape eager = eagerShapeOf(ranks);
    memory.add({{"ranks", ranks}, {"connected peers", ranks - 1}, {"credits per peer", eager.credits},
                {"eager limit", eager.eagerLimit}, {"Pss median", pss.median}, {"Pss min", pss.min},
                {"Pss max", pss.max}, {"Rss median", rss.median}, {"Rss max", rss.max},
                {"pinned median", summarize(result.pinned).median},
                {"Pss after median", summarize(result.pssAfter).median}});
  }
  for (Report* report : {&latency, &idle, &memory}) {
    report->note("machine", machineDescription());
    report->note("provider", options.provider);
    report->note("repetitions", reps);
  }
  latency.setFileStem("idle-peers-ping-pong");
  latency.note("round trips per repetition", kRoundTrips);
  latency.note("idle ranks", "blocked in a socket read (the bench's bootstrap), connected eagerly");
  latency.note("spins", "4096 pauses before a wait yields, at every size (only 2 ranks run)");
  idle.setFileStem("idle-peers-progress");
  idle.note("method", strCat("per repetition, the fastest of ", kIdleProgressBatches, " batches of ",
                             kIdleProgressCalls, " calls (a batch that lost the core measures the scheduler)"));
  memory.setFileStem("idle-peers-memory");
  memory.note("all-to-all rounds", options.rounds);
  memory.note("method", "smaps_rollup before/after, user buffers touched before; min/median/max over the ranks; Pss after: the whole rank after the rounds (shm regions up to 4 MiB, eager buffers among them, are faulted in when mapped)");
  latency.print(common);
  idle.print(common);
  memory.print(common);
}

}  // namespace ibdt::perf
