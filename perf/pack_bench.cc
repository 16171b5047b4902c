// perf/pack_bench.cc — `ibdt-bench pack`: pack/unpack throughput of the
// datatype engine beside memcpy of the same bytes and a hand-written loop,
// all measured in the same run (GB/s of useful bytes, median with min/max).
//
// Cases (issue 2): vectors with 8 B..4 KiB blocks (16 MiB payload), the
// 128 x 4096-int column vector of Wu/Wyckoff/Panda for 1..2048 columns,
// Gropp's 100x100 face of a 200^3 double cube (vector of hvector), the struct
// of Wu et al.'s Figure 8 and an indexed type with random block lengths.
#include <CLI/CLI.hpp>

#include <cstring>
#include <functional>
#include <random>

#include "ibdt/datatype.h"
#include "perf/benchmarks.h"

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

// count blocks of `block` bytes (doubles), block i at i * 2 * block.
Case stridedVector(int64_t block, int64_t payload) {
  const int64_t n = payload / block, elems = block / 8;
  Case c;
  c.name = "vector " + std::to_string(block) + " B blocks";
  c.type = unwrap(Datatype::vector(n, elems, 2 * elems, Datatype::of<double>()), c.name);
  c.typedBytes = 2 * payload;
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

// Wu et al.: `cols` columns of a 128 x 4096 int matrix (row-major).
Case columnVector(int64_t cols) {
  constexpr int64_t kRows = 128, kLd = 4096;
  Case c;
  c.name = "wu column " + std::to_string(cols) + " cols";
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

// Gropp/Lusk/Swider: a my x mz y-z face of an nx*ny*nz double cube.
Case cubeFace() {
  constexpr int64_t kN = 200, kFace = 100;
  Case c;
  c.name = "gropp 3-D face 100x100";
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

// Blocks of arbitrary byte lengths at byte offsets, repeated `count` times at `extent`.
Case blockList(std::string name, Datatype type, std::vector<int64_t> offsets, std::vector<int64_t> lengths,
               int64_t extent, int64_t count) {
  Case c;
  c.name = std::move(name);
  c.type = std::move(type);
  c.count = count;
  c.typedBytes = extent * count;
  auto offs = std::make_shared<std::vector<int64_t>>(std::move(offsets));
  auto lens = std::make_shared<std::vector<int64_t>>(std::move(lengths));
  c.handPack = [offs, lens, extent, count](const char* typed, char* packed) {
    for (int64_t e = 0; e < count; ++e) {
      for (size_t i = 0; i < offs->size(); ++i) {
        std::memcpy(packed, typed + e * extent + (*offs)[i], static_cast<size_t>((*lens)[i]));
        packed += (*lens)[i];
      }
    }
  };
  c.handUnpack = [offs, lens, extent, count](const char* packed, char* typed) {
    for (int64_t e = 0; e < count; ++e) {
      for (size_t i = 0; i < offs->size(); ++i) {
        std::memcpy(typed + e * extent + (*offs)[i], packed, static_cast<size_t>((*lens)[i]));
        packed += (*lens)[i];
      }
    }
  };
  return c;
}

// Wu et al. Figure 8: blocks of 1, 2, ..., x ints, each followed by a one-int gap.
Case wuStruct(int64_t x, int64_t payload) {
  std::vector<int64_t> blens, displs, offs, lens;
  std::vector<Datatype> types;
  int64_t at = 0, bytes = 0;
  for (int64_t i = 1; i <= x; ++i) {
    blens.push_back(i);
    displs.push_back(at);
    types.push_back(Datatype::of<int32_t>());
    offs.push_back(at);
    lens.push_back(4 * i);
    bytes += 4 * i;
    at += 4 * i + 4;
  }
  const std::string name = "wu struct x=" + std::to_string(x);
  Datatype t = unwrap(Datatype::structType(blens, displs, types), name);
  return blockList(name, t, offs, lens, t.extent(), std::max<int64_t>(1, payload / bytes));
}

// Indexed doubles with random block lengths (1..64) and gaps (1..64).
Case randomIndexed(int64_t payload) {
  std::mt19937_64 rng(7);
  std::vector<int64_t> blens, displs, offs, lens;
  int64_t at = 0;
  for (int64_t bytes = 0; bytes < payload;) {
    const int64_t len = 1 + static_cast<int64_t>(rng() % 64);
    blens.push_back(len);
    displs.push_back(at);
    offs.push_back(at * 8);
    lens.push_back(len * 8);
    bytes += len * 8;
    at += len + 1 + static_cast<int64_t>(rng() % 64);
  }
  Datatype t = unwrap(Datatype::indexed(blens, displs, Datatype::of<double>()), "indexed random");
  return blockList("indexed random blocks", t, offs, lens, at * 8, 1);
}

void runCase(Case& c, const CommonOptions& common, Report& report) {
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
  report.add({{"case", c.name},
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
              {"unpack/hand", handUnpack.median / unpack.median}});
}

void runPack(const CommonOptions& common) {
  const int64_t payload = common.quick ? int64_t{1} << 20 : int64_t{16} << 20;
  std::vector<Case> cases;
  for (int64_t block : {8, 64, 512, 4096}) cases.push_back(stridedVector(block, payload));
  const std::vector<int64_t> cols = common.quick ? std::vector<int64_t>{1, 64, 2048}
                                                 : std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048};
  for (int64_t n : cols) cases.push_back(columnVector(n));
  cases.push_back(cubeFace());
  cases.push_back(wuStruct(32, payload));
  cases.push_back(randomIndexed(payload));

  Report report("ibdt-bench pack: GB/s of useful bytes (median of " +
                    std::to_string(common.quick ? 3 : common.reps) + "; min/max in --json)",
                {"case", "bytes", "blocks", "pack GB/s", "hand pack", "memcpy", "unpack GB/s", "hand unpack",
                 "pack/memcpy", "pack/hand", "unpack/hand"});
  for (Case& c : cases) runCase(c, common, report);
  report.note("note", "pack/memcpy and pack/hand are speed ratios (>1: ibdt faster)");
  report.print(common);
}

}  // namespace

void addPackBenchmark(CLI::App& app, const CommonOptions& common) {
  CLI::App* sub = app.add_subcommand("pack", "datatype pack/unpack throughput beside memcpy and hand-written loops");
  sub->fallthrough();  // `ibdt-bench pack --quick --json` as well as `ibdt-bench --quick --json pack`
  sub->callback([&common] { runPack(common); });
}

}  // namespace ibdt::perf
