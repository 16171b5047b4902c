// perf/mpi_pack_baseline.cc — MPI_Pack/MPI_Unpack on the `ibdt-bench pack`
// cases, built once per MPI library found (Open MPI, MPICH) and run by
// ibdt-bench as a singleton process. Prints one JSON line per case:
//   {"case": "<name>", "pack": <GB/s>, "unpack": <GB/s>}
// Usage: ibdt-mpi-pack-<mpi> [--quick] [--reps N] [--warmup N]
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "perf/pack_cases.h"
#include "perf/report.h"

namespace {

using ibdt::perf::PackCase;

struct MpiCase {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  int count = 1;
  int64_t typedBytes = 0;
};

MPI_Datatype blockListType(const ibdt::perf::BlockList& b, MPI_Datatype elem, int elemBytes, bool asStruct) {
  const int n = static_cast<int>(b.blens.size());
  std::vector<int> blens(b.blens.begin(), b.blens.end());
  MPI_Datatype t, resized;
  if (asStruct) {
    std::vector<MPI_Aint> displs;
    for (int64_t d : b.displs) displs.push_back(static_cast<MPI_Aint>(d * elemBytes));
    std::vector<MPI_Datatype> types(static_cast<size_t>(n), elem);
    MPI_Type_create_struct(n, blens.data(), displs.data(), types.data(), &t);
  } else {
    std::vector<int> displs(b.displs.begin(), b.displs.end());
    MPI_Type_indexed(n, blens.data(), displs.data(), elem, &t);
  }
  MPI_Type_create_resized(t, 0, static_cast<MPI_Aint>(b.extentElems * elemBytes), &resized);
  MPI_Type_free(&t);
  return resized;
}

MpiCase build(const PackCase& pc) {
  using K = PackCase::Kind;
  using namespace ibdt::perf;
  MpiCase c;
  switch (pc.kind) {
    case K::kVector: {
      const auto [n, elems] = vectorGeometry(pc.param, pc.payload);
      MPI_Type_vector(static_cast<int>(n), static_cast<int>(elems), static_cast<int>(2 * elems), MPI_DOUBLE, &c.type);
      c.typedBytes = 2 * n * elems * 8;
      break;
    }
    case K::kColumn:
      MPI_Type_vector(kColumnRows, static_cast<int>(pc.param), kColumnLd, MPI_INT, &c.type);
      c.typedBytes = kColumnRows * kColumnLd * 4;
      break;
    case K::kFace: {
      MPI_Datatype column;
      MPI_Type_vector(kCubeFace, 1, kCubeN, MPI_DOUBLE, &column);
      MPI_Type_create_hvector(kCubeFace, 1, kCubeN * kCubeN * 8, column, &c.type);
      MPI_Type_free(&column);
      c.typedBytes = kCubeN * kCubeN * kCubeN * 8;
      break;
    }
    case K::kStruct:
    case K::kIndexed: {
      const bool isStruct = pc.kind == K::kStruct;
      const BlockList b = isStruct ? wuStructBlocks(pc.param, pc.payload) : randomIndexedBlocks(pc.payload);
      c.type = blockListType(b, isStruct ? MPI_INT : MPI_DOUBLE, isStruct ? 4 : 8, isStruct);
      c.count = static_cast<int>(b.count);
      c.typedBytes = b.extentElems * (isStruct ? 4 : 8) * b.count;
      break;
    }
  }
  MPI_Type_commit(&c.type);
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ibdt::perf::CommonOptions options;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) options.quick = true;
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) options.reps = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--warmup") && i + 1 < argc) options.warmup = std::atoi(argv[++i]);
  }
  const int reps = options.quick ? 3 : options.reps, warmup = options.quick ? 1 : options.warmup;
  for (const PackCase& pc : ibdt::perf::packCases(options.quick)) {
    MpiCase c = build(pc);
    int packSize = 0;
    MPI_Pack_size(c.count, c.type, MPI_COMM_SELF, &packSize);
    int typeSize = 0;
    MPI_Type_size(c.type, &typeSize);
    const double bytes = static_cast<double>(typeSize) * c.count;
    std::vector<char> typed(static_cast<size_t>(c.typedBytes), 1), packed(static_cast<size_t>(packSize));
    const int inner = static_cast<int>(std::max<double>(1, std::min<double>(4096, (4 << 20) / std::max(bytes, 1.0))));
    auto pack = ibdt::perf::summarize(ibdt::perf::measure(warmup, reps, inner, [&] {
      int position = 0;
      MPI_Pack(typed.data(), c.count, c.type, packed.data(), packSize, &position, MPI_COMM_SELF);
    }));
    auto unpack = ibdt::perf::summarize(ibdt::perf::measure(warmup, reps, inner, [&] {
      int position = 0;
      MPI_Unpack(packed.data(), packSize, &position, typed.data(), c.count, c.type, MPI_COMM_SELF);
    }));
    const nlohmann::json line = {
        {"case", pc.name}, {"pack", bytes / pack.median / 1e9}, {"unpack", bytes / unpack.median / 1e9}};
    std::printf("%s\n", line.dump().c_str());
    MPI_Type_free(&c.type);
  }
  MPI_Finalize();
  return 0;
}
