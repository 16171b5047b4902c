#include "tools/tune_alltoall.h"

#include <unistd.h>

#include <chrono>
#include <functional>

#include "collectives/alltoall_select.h"
#include "ibdt/collectives.h"
#include "perf/forked_ranks.h"
#include "perf/report.h"

namespace ibdt::tune {
namespace {

using collectives::AlltoallAlgorithm;

// The radix bruck-radix is timed at: 3 gives 2 and 1 rounds of 2 messages
// at p = 4 and 3 (radix 4 would be pairwise's one round of p - 1).
constexpr int64_t kTimedRadix = 3;
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
  std::vector<uint8_t> send(static_cast<size_t>(bytes * p), static_cast<uint8_t>(comm.rank())), recv(send.size(), 0);
  collectives::AlltoallOptions options;
  options.algorithm = algorithm;
  options.radix = kTimedRadix;
  const auto byte = datatype::Datatype::basic(datatype::BasicKind::kByte);
  auto build = [&] { return collectives::alltoallInit(comm, send.data(), bytes, byte, recv.data(), bytes, byte, options); };
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

// One rank of a p-rank job: every algorithm and size; rank 0 keeps the samples.
Status measureRanks(messaging::Bootstrap& bootstrap, const AlltoallMeasureOptions& options, const std::string& jobTag,
                    AlltoallMeasured& measured) {
  IBDT_ASSIGN_OR_RETURN(auto domain, fabric::openDomain(options.provider, {jobTag, ""}));
  messaging::Options messagingOptions;  // the point-to-point part of the file being written, never an earlier one
  messagingOptions.tuneFile = options.tuneFile;
  IBDT_ASSIGN_OR_RETURN(auto context, messaging::Context::create(*domain, bootstrap, messagingOptions));
  IBDT_ASSIGN_OR_RETURN(auto comm, collectives::Communicator::create(*context));
  Status status;
  for (size_t a = 0; a < collectives::kModelledAlltoalls.size() && status.isOk(); ++a) {
    const AlltoallAlgorithm algorithm = collectives::kModelledAlltoalls[a];
    for (int64_t bytes : kBlockBytes) {
      auto timed = timeOne(bootstrap, *comm, algorithm, bytes, options.reps);
      if (!timed.isOk()) {
        status = timed.status();
        status.withContext(
            strCat(collectives::alltoallAlgorithmName(algorithm), ", ", bytes, " B, ", bootstrap.size, " ranks"));
        break;
      }
      const collectives::AlltoallVolume volume =
          collectives::alltoallVolume(algorithm, kTimedRadix, bootstrap.size, bytes);
      if (bootstrap.rank == 0) {
        measured.algorithms[a].samples.push_back({volume.bytes, volume.messages, timed->runSeconds * 1e9});
        measured.algorithms[a].initSamples.push_back({volume.bytes, volume.messages, timed->initSeconds * 1e9});
      }
    }
  }
  Status closed = context->close(Deadline::after(std::chrono::seconds(30)));
  IBDT_RETURN_IF_ERROR(status);
  return closed;
}

}  // namespace

Result<AlltoallMeasured> measureAlltoalls(const AlltoallMeasureOptions& options) {
  AlltoallMeasured measured;
  measured.maxRanks = options.maxRanks;
  measured.blockBytes.assign(std::begin(kBlockBytes), std::end(kBlockBytes));
  for (AlltoallAlgorithm algorithm : collectives::kModelledAlltoalls) {
    measured.algorithms.push_back(
        {collectives::alltoallFitName(algorithm), collectives::alltoallInitFitName(algorithm), {}, {}});
  }
  for (int p = measured.minRanks; p <= options.maxRanks; ++p) {
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
              messaging::Tuning& tuning) {
  auto fit = messaging::fitPathCost(samples, /*withBlocks=*/true);
  if (!fit.isOk()) return std::move(fit).takeStatus().withContext(name);
  tuning.collectives.push_back({name, {fit->perMessageNs, fit->perBlockNs, fit->perByteNs}});
  return Status::ok();
}

}  // namespace

Status fitAlltoalls(const AlltoallMeasured& measured, messaging::Tuning& tuning) {
  tuning.collectives.clear();
  for (const AlltoallSamples& algorithm : measured.algorithms) {
    IBDT_RETURN_IF_ERROR(fitOne(algorithm.fitName, algorithm.samples, tuning));
    IBDT_RETURN_IF_ERROR(fitOne(algorithm.initFitName, algorithm.initSamples, tuning));
  }
  tuning.collectiveMinRanks = measured.minRanks;
  tuning.collectiveMaxRanks = measured.maxRanks;
  tuning.collectiveMinBlock = measured.blockBytes.front();
  tuning.collectiveMaxBlock = measured.blockBytes.back();
  return Status::ok();
}

}  // namespace ibdt::tune
