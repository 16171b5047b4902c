#include "tools/tune_measure.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include "perf/report.h"
#include "transport/messaging/tuning_rounds.h"

namespace ibdt::tune {
namespace {

using datatype::Datatype;
using messaging::Scheme;
using messaging::TunedPath;

// Strided layouts: rows blocks of blockBytes, 16 KiB apart (as the paper's
// 128 x 4096 int matrix), so page walks cost what they cost in real use.
// Sizes and block counts vary independently, so the fit separates the
// per-byte from the per-block cost.
struct Layout {
  int64_t rows;
  int64_t blockBytes;
};
constexpr Layout kStrided[] = {{128, 512}, {128, 2048}, {128, 8192}, {1024, 64}, {512, 256}, {256, 2048}};
constexpr int64_t kStrideBytes = 16384;
constexpr int64_t kContigBytes[] = {65536, 131072, 262144, 1048576};

struct PathPlan {
  TunedPath path;
  Scheme forced;  // kAuto: the pipelined eager path (forced by its limit)
  bool contiguous;
};
constexpr PathPlan kPlans[] = {
    {TunedPath::kPipelined, Scheme::kAuto, false},   {TunedPath::kPipelinedContig, Scheme::kAuto, true},
    {TunedPath::kContig, Scheme::kContiguous, true}, {TunedPath::kBcSpup, Scheme::kBcSpup, false},
    {TunedPath::kRwgUp, Scheme::kRwgUp, false},      {TunedPath::kMultiW, Scheme::kMultiW, false},
    {TunedPath::kPRrs, Scheme::kPRrs, false},       {TunedPath::kGeneric, Scheme::kGeneric, false},
};

// The options that force `plan`'s path, with no tuning file (the timings
// must not depend on an earlier run's file).
messaging::Options forcing(const PathPlan& plan) {
  messaging::Options options;
  options.tuneFile = std::string(messaging::kTuneFileOff);
  options.forcedScheme = plan.forced;
  if (plan.forced == Scheme::kAuto) {
    options.pipelineLimit = int64_t{1} << 30;
    options.pipelineLimitForced = true;
  }
  return options;
}

// One layout the paths are timed at: `count` elements of `type`.
struct Probe {
  Datatype type;
  int64_t count = 1;
  double bytes = 0;
  double blocks = 0;  // 0: contiguous
};

Result<std::vector<Probe>> probes(bool contiguous) {
  std::vector<Probe> out;
  if (contiguous) {
    for (int64_t bytes : kContigBytes) out.push_back({Datatype::of<int32_t>(), bytes / 4, double(bytes), 0});
    return out;
  }
  for (const Layout& layout : kStrided) {
    IBDT_ASSIGN_OR_RETURN(auto type,
                          Datatype::vector(layout.rows, layout.blockBytes / 4, kStrideBytes / 4, Datatype::of<int32_t>()));
    IBDT_RETURN_IF_ERROR(type.commit());
    out.push_back({std::move(type), 1, double(layout.rows * layout.blockBytes), double(layout.rows)});
  }
  return out;
}

// Two round trips of `probe` on `context`; rank 0 gets the half round trip in ns.
Result<double> pingPong(messaging::Context& context, int rank, void* buffer, const Probe& probe) {
  const int peer = 1 - rank;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 2; ++i) {
    IBDT_RETURN_IF_ERROR(rank == 0 ? context.send(buffer, probe.count, probe.type, peer, 1)
                                   : context.recv(buffer, probe.count, probe.type, peer, 1));
    IBDT_RETURN_IF_ERROR(rank == 0 ? context.recv(buffer, probe.count, probe.type, peer, 1)
                                   : context.send(buffer, probe.count, probe.type, peer, 1));
  }
  const std::chrono::duration<double, std::nano> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count() / 4;
}

// The paths of one group (strided or contiguous), each with its context.
struct Group {
  std::vector<const PathPlan*> plans;
  std::vector<std::unique_ptr<messaging::Context>> contexts;
  std::vector<Probe> probes;
  // perRound[probe][path][round]: the median of the path's repetitions in that round.
  std::vector<messaging::RoundTimings> perRound;
};

// One round of `group`: each path in turn (the first rotating from round to
// round) runs every layout, `warmup` untimed ping-pongs and then `reps` timed
// back to back; the median of each is the round's time.
Status timeRound(Group& group, int rank, void* buffer, int warmup, int reps, int round) {
  const size_t n = group.plans.size();
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (k + static_cast<size_t>(round)) % n;
    for (size_t probe = 0; probe < group.probes.size(); ++probe) {
      std::vector<double> times;
      for (int rep = 0; rep < warmup + reps; ++rep) {
        auto ns = pingPong(*group.contexts[i], rank, buffer, group.probes[probe]);
        if (!ns.isOk()) {
          return std::move(ns).takeStatus().withContext(
              strCat("timing ", messaging::tunedPathName(group.plans[i]->path)));
        }
        if (rep >= warmup) times.push_back(*ns);
      }
      group.perRound[probe][static_cast<size_t>(group.plans[i]->path)].push_back(
          perf::summarize(std::move(times)).median);
    }
  }
  return Status::ok();
}

Status openGroup(fabric::Domain& domain, messaging::Bootstrap& bootstrap, bool contiguous, Group& group) {
  for (const PathPlan& plan : kPlans) {
    if (plan.contiguous != contiguous) continue;
    if (plan.path == TunedPath::kPRrs && !domain.caps().rdmaRead) continue;
    IBDT_ASSIGN_OR_RETURN(auto context, messaging::Context::create(domain, bootstrap, forcing(plan)));
    group.plans.push_back(&plan);
    group.contexts.push_back(std::move(context));
  }
  IBDT_ASSIGN_OR_RETURN(group.probes, probes(contiguous));
  group.perRound.resize(group.probes.size());
  return Status::ok();
}

// Rank 0: the combined rounds as samples, and where they disagreed.
Status combine(const Group& group, Measured& measured) {
  for (size_t probe = 0; probe < group.probes.size(); ++probe) {
    const Probe& layout = group.probes[probe];
    IBDT_ASSIGN_OR_RETURN(auto combined, messaging::combineRounds(group.perRound[probe], layout.bytes, layout.blocks));
    for (const PathPlan* plan : group.plans) {
      const auto& ns = combined.ns[static_cast<size_t>(plan->path)];
      if (ns) measured.samples[static_cast<size_t>(plan->path)].push_back({layout.bytes, layout.blocks, *ns});
    }
    ++measured.rounds.layouts;
    if (combined.disagreement) measured.rounds.disagreements.push_back(*combined.disagreement);
  }
  return Status::ok();
}

}  // namespace

Result<Measured> measurePaths(fabric::Domain& domain, messaging::Bootstrap& bootstrap, const MeasureOptions& options) {
  if (bootstrap.size != 2) return makeError(Code::kInvalidArgument, "ibdt-tune measures between exactly two ranks");
  int64_t largest = 0;
  for (const Layout& layout : kStrided) largest = std::max(largest, layout.rows * kStrideBytes);
  std::vector<uint8_t> buffer(static_cast<size_t>(std::max(largest, kContigBytes[3])),
                              static_cast<uint8_t>(bootstrap.rank));
  const int rank = bootstrap.rank;
  const int rounds = std::max(1, options.rounds);
  const int reps = std::max(1, options.reps / rounds);
  // Every path's context open at once, so that the paths can take turns in every round.
  std::array<Group, 2> groups;
  IBDT_RETURN_IF_ERROR(openGroup(domain, bootstrap, false, groups[0]));
  IBDT_RETURN_IF_ERROR(openGroup(domain, bootstrap, true, groups[1]));
  Status status;
  // Rounds outermost: each spans the whole run, so the rounds see the machine's different phases.
  for (int round = 0; round < rounds && status.isOk(); ++round) {
    for (Group& group : groups) {
      if (status.isOk()) status = timeRound(group, rank, buffer.data(), std::max(0, options.warmup), reps, round);
    }
  }
  for (Group& group : groups) {
    for (auto& context : group.contexts) {
      Status closed = context->close(Deadline::after(std::chrono::seconds(30)));
      if (status.isOk()) status = closed;
    }
  }
  IBDT_RETURN_IF_ERROR(status);
  Measured measured;
  measured.minBytes = kContigBytes[0];
  measured.maxBytes = kContigBytes[3];
  if (rank != 0) return measured;
  measured.rounds.count = rounds;
  for (const Group& group : groups) IBDT_RETURN_IF_ERROR(combine(group, measured));
  return measured;
}

}  // namespace ibdt::tune
