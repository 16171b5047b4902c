// ibdt-bench connect --idle-peers — what many connected ranks cost the two
// that talk (issue 16, docs/many-ranks.md). For each job size N the bench
// forks N ranks that connect eagerly, every size's job at once; then
//   * ranks 0 and 1 ping-pong 8 bytes while the N - 2 others idle, blocked
//     in a read (no CPU: the 2 talking ranks keep the cores), so the
//     difference to N = 2 is what every connected peer adds to progress;
//     the jobs take turns repetition by repetition (job_turns.h): this VM's
//     2-rank job alone ranged 0.39-0.93 us from job to job, so jobs run one
//     after another compared phases of the machine, not sizes;
//   * rank 0 times Context::progress() with nothing to do (idle progress);
//   * every rank sends a 32 KiB block to every other (an all-to-all of
//     eager-sized messages, every byte checked) and reports how much its
//     resident memory grew (smaps_rollup Rss and Pss; the user buffers are
//     touched beforehand, so the growth is the eager buffers the exchange
//     touched, Pss sharing the segments both sides map between them).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "ibdt/messaging.h"
#include "perf/benchmarks.h"
#include "perf/forked_ranks.h"
#include "perf/idle_peers.h"
#include "perf/job_turns.h"
#include "perf/process_exit.h"
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

// What a job's rank 0 answers after its ping-pong turns: the idle progress
// times (one per repetition), then {Rss, Pss growth, pinned, Pss after} of
// every rank.
struct Rest {
  std::vector<double> idleProgress;
  std::vector<double> rssGrowth, pssGrowth, pinned, pssAfter;
};

// One rank of job `job`. Ranks 0 and 1 ping-pong one repetition per turn the
// parent gives them (the jobs take turns); rank 0 then waits for the turn of
// the rest, which the jobs take one after another.
Status runRank(messaging::Bootstrap& bootstrap, const IdlePeersOptions& options, JobTurns& turns, int job, int warmup,
               int reps) {
  const int rank = bootstrap.rank, size = bootstrap.size;
  IBDT_ASSIGN_OR_RETURN(auto domain, fabric::openDomain(options.provider, {options.jobTag, ""}));
  messaging::Options contextOptions;
  contextOptions.connect = messaging::Connect::kEager;
  // Only ranks 0 and 1 run (the others sleep in a read): let them spin as
  // they would with a core each, so the rows differ by the provider's cost
  // per connected peer, not by the oversubscribed yield policy.
  contextOptions.spins = 4096;
  IBDT_ASSIGN_OR_RETURN(auto context, Context::create(*domain, bootstrap, contextOptions));
  IBDT_RETURN_IF_ERROR(barrier(bootstrap));
  if (rank < 2) {
    // A core each in every job, as the 2-rank job's ranks have: the rows then
    // differ by the connected peers, not by where the scheduler put the two.
    CoreBinding binding(rank, 2);
    int64_t round = 0;
    std::vector<int64_t> out(static_cast<size_t>(options.pingPongBytes / 8)), in(out.size());
    for (int rep = 0; rep < warmup + reps; ++rep) {
      IBDT_RETURN_IF_ERROR(turns.awaitTurn(job, rank));
      auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < kRoundTrips; ++i) IBDT_RETURN_IF_ERROR(pingPong(*context, rank, round++, out, in));
      const double halfRoundTrip =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kRoundTrips / 2;
      if (rank == 0) IBDT_RETURN_IF_ERROR(turns.answer(job, std::span(&halfRoundTrip, 1)));
    }
  }
  if (rank == 0) IBDT_RETURN_IF_ERROR(turns.awaitTurn(job, 0));
  IBDT_RETURN_IF_ERROR(barrier(bootstrap));  // the idle ranks slept in here
  std::vector<double> answer;
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
      if (rep >= warmup) answer.push_back(fastest);
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
    answer.insert(answer.end(), theirs, theirs + 4);
  }
  if (rank == 0) IBDT_RETURN_IF_ERROR(turns.answer(job, answer));
  return context->close();
}

// Parses rank 0's last answer (runRank) of a job of `size` ranks.
Result<Rest> parseRest(const std::vector<double>& answer, int size, int reps) {
  if (answer.size() != static_cast<size_t>(reps + 4 * size)) {
    return makeError(Code::kProtocol, "idle-peers bench: an answer of ", answer.size(), " values");
  }
  Rest rest;
  rest.idleProgress.assign(answer.begin(), answer.begin() + reps);
  for (int r = 0; r < size; ++r) {
    const double* theirs = answer.data() + reps + 4 * r;
    rest.rssGrowth.push_back(theirs[0]);
    rest.pssGrowth.push_back(theirs[1]);
    rest.pinned.push_back(theirs[2]);
    rest.pssAfter.push_back(theirs[3]);
  }
  return rest;
}

// Waits for every rank of a job; whether all exited with 0 (a failure is
// reported, the rank's own message went to stderr).
bool reap(const std::vector<pid_t>& pids, int size) {
  bool ok = true;
  for (size_t r = 0; r < pids.size(); ++r) {
    int status = 0;
    while (waitpid(pids[r], &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      reportFailure(strCat("idle peers (", size, " ranks): rank ", r, " failed (", describeExit(status), ")"));
      ok = false;
    }
  }
  return ok;
}

// Every job alive at once: the half round trips of each job (one per
// repetition, repetitions taken in turns) and each job's Rest, or nothing
// for a job that failed (reported).
struct JobsMeasured {
  std::vector<std::vector<double>> halfRoundTrips;
  std::vector<std::optional<Rest>> rests;
};

// One ping-pong repetition of `job`: both talking ranks get the turn, rank 0
// answers its half round trip.
Result<std::vector<double>> pingPongTurn(JobTurns& turns, int job) {
  IBDT_RETURN_IF_ERROR(turns.giveTurn(job, 0));
  IBDT_RETURN_IF_ERROR(turns.giveTurn(job, 1));
  IBDT_ASSIGN_OR_RETURN(std::vector<double> answer, turns.awaitAnswer(job));
  if (answer.size() != 1) return makeError(Code::kProtocol, "a ping-pong answer of ", answer.size(), " values");
  return answer;
}

JobsMeasured measureJobs(IdlePeersOptions options, int warmup, int reps) {
  const int jobs = static_cast<int>(options.ranks.size());
  JobsMeasured measured;
  measured.halfRoundTrips.resize(static_cast<size_t>(jobs));
  measured.rests.resize(static_cast<size_t>(jobs));
  auto turns = JobTurns::create(jobs, 2);
  if (!turns.isOk()) {
    reportFailure(strCat("idle peers: ", turns.status().toString()));
    return measured;
  }
  std::vector<std::vector<pid_t>> pids;
  for (int job = 0; job < jobs; ++job) {
    options.jobTag = strCat("idle-peers-", getpid(), "-", job);
    auto forked = forkRankProcesses(options.ranks[static_cast<size_t>(job)], [&](messaging::Bootstrap& bootstrap) {
      turns->keepOnly(job, bootstrap.rank);
      Status status = runRank(bootstrap, options, *turns, job, warmup, reps);
      if (status.isOk()) return 0;
      std::fprintf(stderr, "idle peers (%d ranks, rank %d): %s\n", bootstrap.size, bootstrap.rank,
                   status.toString().c_str());
      return 1;
    });
    if (!forked.isOk()) {
      reportFailure(strCat("idle peers: ", forked.status().toString()));
      break;
    }
    pids.push_back(std::move(*forked));
  }
  turns->keepParentEnds();
  Status status = pids.size() == options.ranks.size() ? Status::ok() : makeError(Code::kSystem, "not every job forked");
  // The ping-pong repetitions in turns, the first job rotating.
  for (int rep = 0; rep < warmup + reps && status.isOk(); ++rep) {
    for (int k = 0; k < jobs && status.isOk(); ++k) {
      const int job = (rep + k) % jobs;
      Result<std::vector<double>> answer = pingPongTurn(*turns, job);
      if (!answer.isOk()) {
        status = answer.status();
        status.withContext(strCat(options.ranks[static_cast<size_t>(job)], " ranks"));
      } else if (rep >= warmup) {
        measured.halfRoundTrips[static_cast<size_t>(job)].push_back(answer->front());
      }
    }
  }
  // The rest, one job at a time (the others asleep).
  for (size_t job = 0; job < pids.size(); ++job) {
    const int size = options.ranks[job];
    if (status.isOk()) {
      Status given = turns->giveTurn(static_cast<int>(job), 0);
      auto answer = given.isOk() ? turns->awaitAnswer(static_cast<int>(job)) : Result<std::vector<double>>(given);
      auto rest = answer.isOk() ? parseRest(*answer, size, reps) : Result<Rest>(answer.status());
      if (rest.isOk()) {
        measured.rests[job] = std::move(*rest);
      } else {
        status = rest.status();
        status.withContext(strCat(size, " ranks"));
      }
    }
    if (!status.isOk()) {
      for (pid_t pid : pids[job]) kill(pid, SIGKILL);  // it waits for turns that will not come
    }
    if (!reap(pids[job], size)) measured.rests[job].reset();
  }
  if (!status.isOk()) reportFailure(strCat("idle peers: ", status.toString()));
  return measured;
}

}  // namespace

void runIdlePeers(const CommonOptions& common, IdlePeersOptions options) {
  int warmup = common.quick ? 1 : common.warmup;
  int reps = common.quick ? 3 : common.reps;
  Report latency(strCat("idle peers: ", options.pingPongBytes,
                        " B ping-pong between ranks 0 and 1, the others connected and idle (µs, half round trip)"),
                 {"ranks", "median", "min", "max", "vs first size", "ratio min", "ratio max"});
  Report idle("idle peers progress: Context::progress() with nothing to do on rank 0, all N - 1 peers connected (ns)",
              {"ranks", "median", "min", "max"});
  Report memory("idle peers memory: resident growth per rank over an all-to-all of 32 KiB blocks (KiB)",
                {"ranks", "connected peers", "credits per peer", "eager limit", "Pss median", "Pss min", "Pss max", "Rss median",
                 "Rss max", "pinned median", "Pss after median"});
  const JobsMeasured measured = measureJobs(options, warmup, reps);
  const std::vector<double>& first = measured.halfRoundTrips.front();
  for (size_t job = 0; job < options.ranks.size(); ++job) {
    const int ranks = options.ranks[job];
    const std::vector<double>& times = measured.halfRoundTrips[job];
    if (!measured.rests[job].has_value() || times.empty()) continue;
    // Repetition k of every job ran in the same round of turns: the ratio per
    // round compares like with like.
    std::vector<double> ratios;
    for (size_t k = 0; k < times.size() && k < first.size(); ++k) ratios.push_back(times[k] / first[k]);
    Summary pingPong = summarize(times), ratio = summarize(ratios);
    latency.add({{"ranks", ranks}, {"median", pingPong.median * 1e6}, {"min", pingPong.min * 1e6},
                 {"max", pingPong.max * 1e6}, {"vs first size", ratio.median}, {"ratio min", ratio.min},
                 {"ratio max", ratio.max}});
    const Rest& rest = *measured.rests[job];
    Summary progress = summarize(rest.idleProgress);
    idle.add({{"ranks", ranks}, {"median", progress.median * 1e9}, {"min", progress.min * 1e9},
              {"max", progress.max * 1e9}});
    Summary pss = summarize(rest.pssGrowth), rss = summarize(rest.rssGrowth);
    const messaging::EagerShape eager = eagerShapeOf(ranks);
    memory.add({{"ranks", ranks}, {"connected peers", ranks - 1}, {"credits per peer", eager.credits},
                {"eager limit", eager.eagerLimit}, {"Pss median", pss.median}, {"Pss min", pss.min},
                {"Pss max", pss.max}, {"Rss median", rss.median}, {"Rss max", rss.max},
                {"pinned median", summarize(rest.pinned).median},
                {"Pss after median", summarize(rest.pssAfter).median}});
  }
  for (Report* report : {&latency, &idle, &memory}) {
    report->note("machine", machineDescription());
    report->note("provider", options.provider);
    report->note("repetitions", reps);
  }
  latency.setFileStem("idle-peers-ping-pong");
  latency.note("round trips per repetition", kRoundTrips);
  latency.note("idle ranks", "blocked in a read, connected eagerly");
  latency.note("jobs", "every size's job alive at once; their repetitions take turns (the first job rotating), so a "
                       "phase of the machine falls on every size alike; vs first size: the median over the rounds "
                       "of turns of this job's time / the first size's in the same round (ratio min/max: their "
                       "range)");
  latency.note("placement", "ranks 0 and 1 bound to a core each in every job");
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
