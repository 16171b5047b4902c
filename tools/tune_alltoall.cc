#include "tools/tune_alltoall.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>

#include "collectives/alltoall_select.h"
#include "ibdt/collectives.h"
#include "perf/alltoall_cases.h"
#include "perf/forked_ranks.h"
#include "perf/report.h"
#include "perf/simulated_nodes.h"

namespace ibdt::tune {
namespace {

using collectives::AlltoallAlgorithm;

// Few sizes, the small end dense: the per-message term decides there; 64
// KiB, beyond direct-write's crossover, anchors the per-byte terms.
constexpr int64_t kBlockBytes[] = {8, 256, 4096, 16384, 65536};

int callsPerRep(int64_t bytes) { return bytes <= 256 ? 10 : 3; }

// The slowest rank's median seconds of each repetition of `body` (a
// barrier before each, so that a collective init starts together).
Result<double> slowestMedian(messaging::Bootstrap& bootstrap, collectives::Communicator& comm, int reps,
                             const std::function<Result<double>()>& body) {
  constexpr int kWarmup = 3;
  std::vector<double> mine;
  for (int rep = 0; rep < kWarmup + reps; ++rep) {
    IBDT_RETURN_IF_ERROR(collectives::barrier(comm, Deadline::after(std::chrono::seconds(60))));
    IBDT_ASSIGN_OR_RETURN(double seconds, body());
    if (rep >= kWarmup) mine.push_back(seconds);
  }
  IBDT_ASSIGN_OR_RETURN(std::vector<double> slowest, perf::slowestAcrossRanks(bootstrap, mine));
  return perf::summarize(std::move(slowest)).median;
}

struct Timed {
  double runSeconds = 0;   // per call of a started persistent plan
  double initSeconds = 0;  // plan creation: init + destroy, no run
};

// One (algorithm, size): its plan's creation, then its calls.
Result<Timed> timeOne(messaging::Bootstrap& bootstrap, collectives::Communicator& comm, AlltoallAlgorithm algorithm,
                      int64_t bytes, int reps) {
  const int p = comm.size();
  // Page-aligned as the bench's (perf/alltoall_cases.h): a copy's distance modulo 4 KiB can cost 3x (docs/tuning.md).
  perf::AlltoallBuffer send(static_cast<size_t>(bytes * p), static_cast<uint8_t>(comm.rank())), recv(send.size(), 0);
  collectives::AlltoallOptions options;
  options.algorithm = algorithm;
  options.radix = collectives::kTunedRadix;
  const auto byte = datatype::Datatype::basic(datatype::BasicKind::kByte);
  auto build = [&] {
    return collectives::alltoallInit(comm, send.data(), bytes, byte, recv.data(), bytes, byte, options);
  };
  Timed timed;
  IBDT_ASSIGN_OR_RETURN(timed.initSeconds, slowestMedian(bootstrap, comm, reps, [&]() -> Result<double> {
                          const auto start = std::chrono::steady_clock::now();
                          { IBDT_ASSIGN_OR_RETURN(collectives::Plan plan, build()); }
                          return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
                        }));
  IBDT_ASSIGN_OR_RETURN(collectives::Plan plan, build());
  const int calls = callsPerRep(bytes);
  IBDT_ASSIGN_OR_RETURN(timed.runSeconds, slowestMedian(bootstrap, comm, reps, [&]() -> Result<double> {
                          const auto start = std::chrono::steady_clock::now();
                          for (int i = 0; i < calls; ++i) {
                            IBDT_RETURN_IF_ERROR(plan.start());
                            IBDT_RETURN_IF_ERROR(plan.wait(Deadline::after(std::chrono::seconds(60))));
                          }
                          const auto elapsed = std::chrono::steady_clock::now() - start;
                          return std::chrono::duration<double>(elapsed).count() / calls;
                        }));
  return timed;
}

// Passes over the algorithms per block size: each keeps its fastest pass.
constexpr int kPasses = 2;

// One rank of a p-rank job: every algorithm and size; rank 0 keeps the
// samples. The algorithms of one size are timed in turn, pass after pass,
// not one algorithm over every size: the selection compares algorithms at
// one size, and on a shared machine the cost of the same alltoall moves by
// 2-3x between moments (docs/alltoall-selection.md, "Samples"), so timed
// minutes apart the first algorithm (pairwise) and the last could each
// catch another moment. The fastest pass is the one least disturbed.
Status measureRanks(messaging::Bootstrap& bootstrap, const AlltoallMeasureOptions& options, const std::string& jobTag,
                    AlltoallMeasured& measured) {
  IBDT_ASSIGN_OR_RETURN(auto domain, fabric::openDomain(options.provider, {jobTag, ""}));
  messaging::Options messagingOptions;  // the point-to-point part of the file being written, never an earlier one
  messagingOptions.tuneFile = options.tuneFile;
  IBDT_ASSIGN_OR_RETURN(auto context, messaging::Context::create(*domain, bootstrap, messagingOptions));
  // On kTunedNodes simulated nodes: the hierarchical alltoall needs a node
  // map; the other algorithms do not look at it (one host either way).
  IBDT_ASSIGN_OR_RETURN(auto comm, collectives::Communicator::create(
                                       *context, perf::simulatedNodes(bootstrap.size, collectives::kTunedNodes)));
  // The shared-memory alltoall runs among one node's ranks only: timed on the same ranks as one node.
  IBDT_ASSIGN_OR_RETURN(auto oneNode, collectives::Communicator::create(*context, {},
                                                                        comm->contextId() + collectives::Communicator::kMaxSplitIds));
  Status status;
  for (int64_t bytes : kBlockBytes) {
    std::vector<Timed> fastest(collectives::kModelledAlltoalls.size());
    for (int pass = 0; pass < kPasses && status.isOk(); ++pass) {
      for (size_t a = 0; a < fastest.size() && status.isOk(); ++a) {
        const AlltoallAlgorithm algorithm = collectives::kModelledAlltoalls[a];
        auto timed = timeOne(bootstrap, algorithm == AlltoallAlgorithm::kSharedMemory ? *oneNode : *comm, algorithm,
                             bytes, options.reps);
        if (!timed.isOk()) {
          status = timed.status();
          status.withContext(
              strCat(collectives::alltoallAlgorithmName(algorithm), ", ", bytes, " B, ", bootstrap.size, " ranks"));
          break;
        }
        Timed& best = fastest[a];
        best.runSeconds = pass == 0 ? timed->runSeconds : std::min(best.runSeconds, timed->runSeconds);
        best.initSeconds = pass == 0 ? timed->initSeconds : std::min(best.initSeconds, timed->initSeconds);
      }
    }
    if (!status.isOk()) break;
    if (bootstrap.rank != 0) continue;
    for (size_t a = 0; a < fastest.size(); ++a) {
      // The hierarchical plan timed was the relay where its chunk took the single copy (its agreement's vote).
      const bool relay = context->exchangeSingleCopy(comm->contextId(), bytes * bootstrap.size);
      const collectives::AlltoallVolume volume =
          collectives::alltoallVolume(collectives::kModelledAlltoalls[a], collectives::kTunedRadix, bootstrap.size,
                                      bytes, collectives::kTunedNodes, relay);
      AlltoallSamples& samples = measured.algorithms[a];
      samples.samples.push_back({volume.bytes, volume.messages, fastest[a].runSeconds * 1e9});
      samples.initSamples.push_back({volume.bytes, volume.messages, fastest[a].initSeconds * 1e9});
      samples.points.push_back({bootstrap.size, bytes, fastest[a].runSeconds * 1e9});
      samples.initPoints.push_back({bootstrap.size, bytes, fastest[a].initSeconds * 1e9});
    }
  }
  Status closed = context->close(Deadline::after(std::chrono::seconds(30)));
  IBDT_RETURN_IF_ERROR(status);
  return closed;
}

}  // namespace

std::vector<int> alltoallRankCounts(int maxRanks) {
  std::vector<int> counts;
  for (int p = 2; p <= std::min(maxRanks, 8); ++p) counts.push_back(p);
  for (int p = 16; p < maxRanks; p *= 2) counts.push_back(p);
  if (maxRanks > 8) counts.push_back(maxRanks);
  return counts;
}

Result<AlltoallMeasured> measureAlltoalls(const AlltoallMeasureOptions& options) {
  AlltoallMeasured measured;
  measured.maxRanks = options.maxRanks;
  measured.blockBytes.assign(std::begin(kBlockBytes), std::end(kBlockBytes));
  for (AlltoallAlgorithm algorithm : collectives::kModelledAlltoalls) {
    measured.algorithms.push_back(
        {collectives::alltoallFitName(algorithm), collectives::alltoallInitFitName(algorithm), {}, {}, {}, {}});
  }
  for (int p : alltoallRankCounts(options.maxRanks)) {
    const std::string jobTag = "ibdt-tune-a2a-" + std::to_string(getpid()) + "-" + std::to_string(p);
    const bool ok = perf::runForkedRanks("ibdt-tune alltoall", p, [&](messaging::Bootstrap& bootstrap) {
      return measureRanks(bootstrap, options, jobTag, measured);
    });
    if (!ok) return makeError(Code::kInternal, "ibdt-tune: timing alltoalls at ", p, " ranks failed");
  }
  return measured;
}

namespace {

// The point-to-point fit with its columns renamed: its per-message term is
// the fixed cost, its per-block term the cost per message sent.
Status fitOne(const std::string& name, const std::vector<messaging::TuningSample>& samples,
              const std::vector<messaging::CollectiveSample>& points, messaging::Tuning& tuning) {
  auto fit = messaging::fitPathCost(samples, /*withBlocks=*/true);
  if (!fit.isOk()) return std::move(fit).takeStatus().withContext(name);
  tuning.collectives.push_back({name, {fit->perMessageNs, fit->perBlockNs, fit->perByteNs}, points});
  return Status::ok();
}

}  // namespace

Status fitAlltoalls(const AlltoallMeasured& measured, messaging::Tuning& tuning) {
  tuning.collectives.clear();
  for (const AlltoallSamples& algorithm : measured.algorithms) {
    IBDT_RETURN_IF_ERROR(fitOne(algorithm.fitName, algorithm.samples, algorithm.points, tuning));
    IBDT_RETURN_IF_ERROR(fitOne(algorithm.initFitName, algorithm.initSamples, algorithm.initPoints, tuning));
  }
  tuning.collectiveMinRanks = measured.minRanks;
  tuning.collectiveMaxRanks = measured.maxRanks;
  tuning.collectiveMinBlock = measured.blockBytes.front();
  tuning.collectiveMaxBlock = measured.blockBytes.back();
  return Status::ok();
}

}  // namespace ibdt::tune
