// perf/pack_bench.cc — `ibdt-bench pack`: pack/unpack throughput of the
// datatype engine beside memcpy of the same bytes and a hand-written loop,
// all measured in the same run (GB/s of useful bytes, median with min/max).
//
// Cases (issue 2): vectors with 8 B..4 KiB blocks (16 MiB payload), the
// 128 x 4096-int column vector of Wu/Wyckoff/Panda for 1..2048 columns,
// Gropp's 100x100 face of a 200^3 double cube (vector of hvector), the struct
// of Wu et al.'s Figure 8 and an indexed type with random block lengths.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <sstream>

#include "ibdt/datatype.h"
#include "perf/benchmarks.h"
#include "perf/mpi_baseline_runner.h"
#include "perf/pack_cases.h"

namespace ibdt::perf {
namespace {

using datatype::Datatype;
using datatype::Segment;

struct Case {
  std::string name;
  Datatype type;
  int64_t count = 1;
  int64_t typedBytes = 0;                                 // buffer the layout spans (from offset 0)
  std::function<void(const char*, char*)> handPack;      // typed -> packed
  std::function<void(const char*, char*)> handUnpack;    // packed -> typed
};

double gbps(int64_t bytes, double seconds) { return static_cast<double>(bytes) / seconds / 1e9; }

template <typename T>
T unwrap(Result<T> r, const std::string& what) {
  if (!r.isOk()) {
    reportFailure(what + ": " + r.status().toString());
    std::exit(exitCode());
  }
  return std::move(r).value();
}

Case stridedVector(const std::string& name, int64_t block, int64_t payload) {
  const auto [n, elems] = vectorGeometry(block, payload);
  Case c;
  c.name = name;
  c.type = unwrap(Datatype::vector(n, elems, 2 * elems, Datatype::of<double>()), c.name);
  c.typedBytes = 2 * n * elems * 8;
  c.handPack = [n, elems](const char* typed, char* packed) {
    const double* in = reinterpret_cast<const double*>(typed);
    double* out = reinterpret_cast<double*>(packed);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < elems; ++j) *out++ = in[i * 2 * elems + j];
    }
  };
  c.handUnpack = [n, elems](const char* packed, char* typed) {
    const double* in = reinterpret_cast<const double*>(packed);
    double* out = reinterpret_cast<double*>(typed);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < elems; ++j) out[i * 2 * elems + j] = *in++;
    }
  };
  return c;
}

Case columnVector(const std::string& name, int64_t cols) {
  constexpr int64_t kRows = kColumnRows, kLd = kColumnLd;
  Case c;
  c.name = name;
  c.type = unwrap(Datatype::vector(kRows, cols, kLd, Datatype::of<int32_t>()), c.name);
  c.typedBytes = kRows * kLd * 4;
  c.handPack = [cols](const char* typed, char* packed) {
    const int32_t* in = reinterpret_cast<const int32_t*>(typed);
    int32_t* out = reinterpret_cast<int32_t*>(packed);
    for (int64_t r = 0; r < kRows; ++r) {
      for (int64_t j = 0; j < cols; ++j) *out++ = in[r * kLd + j];
    }
  };
  c.handUnpack = [cols](const char* packed, char* typed) {
    const int32_t* in = reinterpret_cast<const int32_t*>(packed);
    int32_t* out = reinterpret_cast<int32_t*>(typed);
    for (int64_t r = 0; r < kRows; ++r) {
      for (int64_t j = 0; j < cols; ++j) out[r * kLd + j] = *in++;
    }
  };
  return c;
}

Case cubeFace(const std::string& name) {
  constexpr int64_t kN = kCubeN, kFace = kCubeFace;
  Case c;
  c.name = name;
  Datatype column = unwrap(Datatype::vector(kFace, 1, kN, Datatype::of<double>()), c.name);
  c.type = unwrap(Datatype::hvector(kFace, 1, kN * kN * 8, column), c.name);
  c.typedBytes = kN * kN * kN * 8;
  c.handPack = [](const char* typed, char* packed) {
    const double* in = reinterpret_cast<const double*>(typed);
    double* out = reinterpret_cast<double*>(packed);
    for (int64_t z = 0; z < kFace; ++z) {
      for (int64_t y = 0; y < kFace; ++y) *out++ = in[z * kN * kN + y * kN];
    }
  };
  c.handUnpack = [](const char* packed, char* typed) {
    const double* in = reinterpret_cast<const double*>(packed);
    double* out = reinterpret_cast<double*>(typed);
    for (int64_t z = 0; z < kFace; ++z) {
      for (int64_t y = 0; y < kFace; ++y) out[z * kN * kN + y * kN] = *in++;
    }
  };
  return c;
}

// A block list of `elemBytes`-sized elements (struct or indexed type), with a
// memcpy per block as the hand-written loop.
Case blockList(const std::string& name, const Datatype& type, const BlockList& b, int64_t elemBytes) {
  Case c;
  c.name = name;
  c.type = type;
  c.count = b.count;
  const int64_t extent = type.extent();
  c.typedBytes = extent * b.count;
  auto list = std::make_shared<BlockList>(b);
  auto copy = [list, extent, elemBytes](char* typed, char* packed, bool pack) {
    for (int64_t e = 0; e < list->count; ++e) {
      for (size_t i = 0; i < list->blens.size(); ++i) {
        char* t = typed + e * extent + list->displs[i] * elemBytes;
        const size_t len = static_cast<size_t>(list->blens[i] * elemBytes);
        pack ? std::memcpy(packed, t, len) : std::memcpy(t, packed, len);
        packed += len;
      }
    }
  };
  c.handPack = [copy](const char* typed, char* packed) { copy(const_cast<char*>(typed), packed, true); };
  c.handUnpack = [copy](const char* packed, char* typed) { copy(typed, const_cast<char*>(packed), false); };
  return c;
}

Case wuStruct(const std::string& name, int64_t x, int64_t payload) {
  const BlockList b = wuStructBlocks(x, payload);
  std::vector<int64_t> bytes;
  for (int64_t d : b.displs) bytes.push_back(4 * d);
  const std::vector<Datatype> types(b.blens.size(), Datatype::of<int32_t>());
  return blockList(name, unwrap(Datatype::structType(b.blens, bytes, types), name), b, 4);
}

Case randomIndexed(const std::string& name, int64_t payload) {
  const BlockList b = randomIndexedBlocks(payload);
  Datatype t = unwrap(Datatype::indexed(b.blens, b.displs, Datatype::of<double>()), name);
  return blockList(name, unwrap(Datatype::resized(t, 0, b.extentElems * 8), name), b, 8);
}

Case makeCase(const PackCase& pc) {
  switch (pc.kind) {
    case PackCase::Kind::kVector: return stridedVector(pc.name, pc.param, pc.payload);
    case PackCase::Kind::kColumn: return columnVector(pc.name, pc.param);
    case PackCase::Kind::kFace: return cubeFace(pc.name);
    case PackCase::Kind::kStruct: return wuStruct(pc.name, pc.param, pc.payload);
    case PackCase::Kind::kIndexed: break;
  }
  return randomIndexed(pc.name, pc.payload);
}

// MPI_Pack measured by perf/mpi_pack_baseline.cc, built per MPI library.
struct Baseline {
  std::string label;                                        // "ompi", "mpich"
  std::map<std::string, std::pair<double, double>> rates;  // case -> pack, unpack GB/s
};

// One case's baselines, measured just before ibdt's: on a loaded machine the
// memory bandwidth a process gets changes within seconds, so rates measured
// minutes apart compare the load, not the libraries.
std::vector<Baseline> runBaselines(const CommonOptions& common, const std::string& caseName, Report& report) {
  std::vector<Baseline> out;
  std::vector<std::string> args = {"--reps", std::to_string(common.reps), "--warmup", std::to_string(common.warmup),
                                   "--case", caseName};
  if (common.quick) args.emplace_back("--quick");
  for (const MpiLibrary& library : mpiLibraries()) {
    auto lines = runMpiBaseline(library, library.packProgram, 1, args, std::chrono::seconds(600));
    if (!lines.isOk()) {
      report.note(library.label + " baseline", "not available: " + lines.status().toString());
      continue;
    }
    Baseline b{library.label, {}};
    for (const nlohmann::json& line : *lines) {
      if (line.contains("case")) b.rates[line["case"]] = {line.value("pack", 0.0), line.value("unpack", 0.0)};
    }
    out.push_back(std::move(b));
  }
  return out;
}

void runCase(Case& c, const CommonOptions& common, const std::vector<Baseline>& baselines, Report& report) {
  if (Status s = c.type.commit(); !s.isOk()) {
    reportFailure(c.name + ": " + s.toString());
    return;
  }
  Segment seg = unwrap(Segment::create(c.type, c.count), c.name);
  const int64_t bytes = seg.size();
  std::vector<char> typed(static_cast<size_t>(c.typedBytes)), typedHand(typed.size());
  std::vector<char> packed(static_cast<size_t>(bytes)), packedHand(packed.size()), copy(packed.size());
  std::mt19937_64 rng(1);
  for (char& b : typed) b = static_cast<char>(rng());
  typedHand = typed;

  // Enough calls per timed repetition that small cases take ~2 ms.
  const int inner = static_cast<int>(std::clamp<int64_t>((int64_t{4} << 20) / std::max<int64_t>(bytes, 1), 1, 4096));
  const int reps = common.quick ? 3 : common.reps, warmup = common.quick ? 1 : common.warmup;
  auto time = [&](auto&& fn) { return summarize(measure(warmup, reps, inner, fn)); };
  const Summary pack = time([&] { (void)seg.pack(typed.data(), 0, bytes, packed.data()); });
  const Summary handPack = time([&] { c.handPack(typed.data(), packedHand.data()); });
  const Summary memcpyTime = time([&] { std::memcpy(copy.data(), packed.data(), packed.size()); });
  const Summary unpack = time([&] { (void)seg.unpack(typed.data(), 0, bytes, packed.data()); });
  const Summary handUnpack = time([&] { c.handUnpack(packed.data(), typedHand.data()); });
  if (packed != packedHand) reportFailure(c.name + ": ibdt pack differs from the hand-written loop");
  if (typed != typedHand) reportFailure(c.name + ": ibdt unpack differs from the hand-written loop");

  auto stat = unwrap(datatype::stats(c.type, c.count), c.name);
  // Throughput: median, and min/max from the fastest/slowest time.
  auto rate = [&](const Summary& s) { return gbps(bytes, s.median); };
  nlohmann::json row = {{"case", c.name},
              {"family", c.name.substr(0, c.name.find_first_of("0123456789") == std::string::npos
                                                 ? c.name.size()
                                                 : c.name.find_first_of("0123456789"))},
              {"bytes", bytes},
              {"blocks", stat.blockCount},
              {"pack GB/s", rate(pack)},
              {"pack_min", gbps(bytes, pack.max)},
              {"pack_max", gbps(bytes, pack.min)},
              {"hand pack", rate(handPack)},
              {"hand_pack_min", gbps(bytes, handPack.max)},
              {"hand_pack_max", gbps(bytes, handPack.min)},
              {"memcpy", rate(memcpyTime)},
              {"memcpy_min", gbps(bytes, memcpyTime.max)},
              {"memcpy_max", gbps(bytes, memcpyTime.min)},
              {"unpack GB/s", rate(unpack)},
              {"unpack_min", gbps(bytes, unpack.max)},
              {"unpack_max", gbps(bytes, unpack.min)},
              {"hand unpack", rate(handUnpack)},
              {"hand_unpack_min", gbps(bytes, handUnpack.max)},
              {"hand_unpack_max", gbps(bytes, handUnpack.min)},
              {"pack/memcpy", memcpyTime.median / pack.median},
              {"pack/hand", handPack.median / pack.median},
              {"unpack/hand", handUnpack.median / unpack.median}};
  for (const Baseline& b : baselines) {
    auto it = b.rates.find(c.name);
    if (it == b.rates.end()) continue;
    row[b.label + " pack"] = it->second.first;
    row[b.label + " unpack"] = it->second.second;
  }
  report.add(std::move(row));
}

void runPack(const CommonOptions& common, const std::string& only) {
  std::vector<Case> cases;
  for (const PackCase& pc : packCases(common.quick)) {
    if (pc.name.find(only) != std::string::npos) cases.push_back(makeCase(pc));
  }

  Report report("ibdt-bench pack: GB/s of useful bytes (median of " +
                    std::to_string(common.quick ? 3 : common.reps) + "; min/max in --json)",
                {"case", "bytes", "blocks", "pack GB/s", "hand pack", "memcpy", "ompi pack", "mpich pack",
                 "unpack GB/s", "hand unpack", "ompi unpack", "mpich unpack", "pack/memcpy", "pack/hand",
                 "unpack/hand"});
  for (Case& c : cases) runCase(c, common, runBaselines(common, c.name, report), report);
  report.note("note", "pack/memcpy and pack/hand are speed ratios (>1: ibdt faster)");
  report.setFileStem("pack");
  for (const char* what : {"pack", "unpack"}) {
    const bool pack = std::string_view(what) == "pack";
    report.plot({std::string("wu-columns-") + what,
                 std::string(what) + " of x columns of a 128 x 4096 int array (" + machineDescription() + ")", "bytes", "",
                 "", "message bytes", "GB/s of useful bytes", {{"family", "wu column "}},
                 pack ? std::vector<std::string>{"pack GB/s", "hand pack", "memcpy", "ompi pack", "mpich pack"}
                      : std::vector<std::string>{"unpack GB/s", "hand unpack", "ompi unpack", "mpich unpack"}});
  }
  report.print(common);
}

}  // namespace

void addPackBenchmark(CLI::App& app, const CommonOptions& common) {
  CLI::App* sub = app.add_subcommand("pack", "datatype pack/unpack throughput beside memcpy and hand-written loops");
  sub->fallthrough();  // `ibdt-bench pack --quick --json` as well as `ibdt-bench --quick --json pack`
  auto only = std::make_shared<std::string>();
  sub->add_option("--case", *only, "run only the cases whose name contains this text");
  sub->callback([&common, only] { runPack(common, *only); });
}

}  // namespace ibdt::perf
