#include "tools/tune_alltoall.h"

#include <unistd.h>

#include <chrono>

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
// Few sizes, the small end dense: the per-message term decides there.
constexpr int64_t kBlockBytes[] = {8, 256, 4096, 16384};

int callsPerRep(int64_t bytes) { return bytes <= 256 ? 10 : 3; }

// The slowest rank's median seconds per call of one (algorithm, size).
Result<double> timeOne(messaging::Bootstrap& bootstrap, collectives::Communicator& comm, AlltoallAlgorithm algorithm,
                       int64_t bytes, int reps) {
  const int p = comm.size();
  std::vector<uint8_t> send(static_cast<size_t>(bytes * p), static_cast<uint8_t>(comm.rank())), recv(send.size(), 0);
  collectives::AlltoallOptions options;
  options.algorithm = algorithm;
  options.radix = kTimedRadix;
  const auto byte = datatype::Datatype::basic(datatype::BasicKind::kByte);
  IBDT_ASSIGN_OR_RETURN(collectives::Plan plan,
                        collectives::alltoallInit(comm, send.data(), bytes, byte, recv.data(), bytes, byte, options));
  const int calls = callsPerRep(bytes), warmup = 3;
  std::vector<double> mine;
  for (int rep = 0; rep < warmup + reps; ++rep) {
    IBDT_RETURN_IF_ERROR(collectives::barrier(comm, Deadline::after(std::chrono::seconds(60))));
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) {
      IBDT_RETURN_IF_ERROR(plan.start());
      IBDT_RETURN_IF_ERROR(plan.wait(Deadline::after(std::chrono::seconds(60))));
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (rep >= warmup) mine.push_back(seconds / calls);
  }
  IBDT_ASSIGN_OR_RETURN(std::vector<double> slowest, perf::slowestAcrossRanks(bootstrap, mine));
  return perf::summarize(std::move(slowest)).median;
}

// One rank of a p-rank job: every algorithm and size; rank 0 keeps the samples.
Status measureRanks(messaging::Bootstrap& bootstrap, const AlltoallMeasureOptions& options, const std::string& jobTag,
                    AlltoallMeasured& measured) {
  IBDT_ASSIGN_OR_RETURN(auto domain, fabric::openDomain(options.provider, {jobTag, ""}));
  messaging::Options messagingOptions;  // no tuning file: the timings must not depend on an earlier one
  messagingOptions.tuneFile = std::string(messaging::kTuneFileOff);
  IBDT_ASSIGN_OR_RETURN(auto context, messaging::Context::create(*domain, bootstrap, messagingOptions));
  IBDT_ASSIGN_OR_RETURN(auto comm, collectives::Communicator::create(*context));
  Status status;
  for (size_t a = 0; a < collectives::kModelledAlltoalls.size() && status.isOk(); ++a) {
    const AlltoallAlgorithm algorithm = collectives::kModelledAlltoalls[a];
    for (int64_t bytes : kBlockBytes) {
      auto seconds = timeOne(bootstrap, *comm, algorithm, bytes, options.reps);
      if (!seconds.isOk()) {
        status = seconds.status();
        status.withContext(
            strCat(collectives::alltoallAlgorithmName(algorithm), ", ", bytes, " B, ", bootstrap.size, " ranks"));
        break;
      }
      const collectives::AlltoallVolume volume =
          collectives::alltoallVolume(algorithm, kTimedRadix, bootstrap.size, bytes);
      if (bootstrap.rank == 0)
        measured.algorithms[a].samples.push_back({volume.bytes, volume.messages, *seconds * 1e9});
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
    measured.algorithms.push_back({collectives::alltoallFitName(algorithm), {}});
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

Status fitAlltoalls(const AlltoallMeasured& measured, messaging::Tuning& tuning) {
  tuning.collectives.clear();
  for (const AlltoallSamples& algorithm : measured.algorithms) {
    // The point-to-point fit with its columns renamed: its per-message term
    // is the fixed cost, its per-block term the cost per message sent.
    auto fit = messaging::fitPathCost(algorithm.samples, /*withBlocks=*/true);
    if (!fit.isOk()) return std::move(fit).takeStatus().withContext(algorithm.fitName);
    tuning.collectives.push_back({algorithm.fitName, {fit->perMessageNs, fit->perBlockNs, fit->perByteNs}});
  }
  tuning.collectiveMinRanks = measured.minRanks;
  tuning.collectiveMaxRanks = measured.maxRanks;
  tuning.collectiveMinBlock = measured.blockBytes.front();
  tuning.collectiveMaxBlock = measured.blockBytes.back();
  return Status::ok();
}

}  // namespace ibdt::tune
