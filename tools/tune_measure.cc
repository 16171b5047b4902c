#include "tools/tune_measure.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>

#include "perf/report.h"

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

// Median half round trip (ns) of `count` elements of `type` at `buffer`.
Result<double> pingPong(messaging::Context& context, int rank, void* buffer, int64_t count, const Datatype& type,
                        const MeasureOptions& options) {
  const int peer = 1 - rank;
  Status failed;
  auto once = [&] {
    Status s = rank == 0 ? context.send(buffer, count, type, peer, 1) : context.recv(buffer, count, type, peer, 1);
    if (s.isOk())
      s = rank == 0 ? context.recv(buffer, count, type, peer, 1) : context.send(buffer, count, type, peer, 1);
    if (failed.isOk() && !s.isOk()) failed = s;
  };
  auto seconds = perf::measure(options.warmup, options.reps, 2, once);
  IBDT_RETURN_IF_ERROR(failed);
  return perf::summarize(seconds).median / 2 * 1e9;
}

Status measurePath(fabric::Domain& domain, messaging::Bootstrap& bootstrap, const PathPlan& plan,
                   const MeasureOptions& options, std::vector<uint8_t>& buffer, Measured& measured) {
  IBDT_ASSIGN_OR_RETURN(auto context, messaging::Context::create(domain, bootstrap, forcing(plan)));
  const int rank = bootstrap.rank;
  std::vector<messaging::TuningSample>& samples = measured.samples[static_cast<size_t>(plan.path)];
  Status status;
  if (plan.contiguous) {
    for (int64_t bytes : kContigBytes) {
      auto ns = pingPong(*context, rank, buffer.data(), bytes / 4, Datatype::of<int32_t>(), options);
      if (!ns.isOk()) {
        status = ns.status();
        break;
      }
      samples.push_back({static_cast<double>(bytes), 0, *ns});
    }
  } else {
    for (const Layout& layout : kStrided) {
      auto type = Datatype::vector(layout.rows, layout.blockBytes / 4, kStrideBytes / 4, Datatype::of<int32_t>());
      if (type.isOk())
        status = type->commit();
      else
        status = type.status();
      if (!status.isOk()) break;
      auto ns = pingPong(*context, rank, buffer.data(), 1, *type, options);
      if (!ns.isOk()) {
        status = ns.status();
        break;
      }
      samples.push_back({static_cast<double>(layout.rows * layout.blockBytes), static_cast<double>(layout.rows), *ns});
    }
  }
  Status closed = context->close(Deadline::after(std::chrono::seconds(30)));
  IBDT_RETURN_IF_ERROR(status.withContext(strCat("timing ", messaging::tunedPathName(plan.path))));
  if (rank != 0) samples.clear();
  return closed;
}

}  // namespace

Result<Measured> measurePaths(fabric::Domain& domain, messaging::Bootstrap& bootstrap, const MeasureOptions& options) {
  if (bootstrap.size != 2) return makeError(Code::kInvalidArgument, "ibdt-tune measures between exactly two ranks");
  int64_t largest = 0;
  for (const Layout& layout : kStrided) largest = std::max(largest, layout.rows * kStrideBytes);
  std::vector<uint8_t> buffer(static_cast<size_t>(std::max(largest, kContigBytes[3])),
                              static_cast<uint8_t>(bootstrap.rank));
  Measured measured;
  measured.minBytes = kContigBytes[0];
  measured.maxBytes = kContigBytes[3];
  for (const PathPlan& plan : kPlans) {
    if (plan.path == TunedPath::kPRrs && !domain.caps().rdmaRead) continue;
    IBDT_RETURN_IF_ERROR(measurePath(domain, bootstrap, plan, options, buffer, measured));
  }
  return measured;
}

}  // namespace ibdt::tune
