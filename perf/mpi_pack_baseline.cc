// perf/mpi_pack_baseline.cc — MPI_Pack/MPI_Unpack on the `ibdt-bench pack`
// cases, built once per MPI library found (Open MPI, MPICH) and run by
// ibdt-bench as a singleton process. Prints one JSON line per case:
//   {"case": "<name>", "pack": <GB/s>, "unpack": <GB/s>}
// Usage: ibdt-mpi-pack-<mpi> [--quick] [--reps N] [--warmup N] [--case NAME]
// (--case: only the case of that exact name, so that ibdt-bench can measure
// each case's baselines right beside ibdt's own, not minutes apart.)
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "perf/mpi_pack_types.h"
#include "perf/pack_cases.h"
#include "perf/report.h"

namespace {

using ibdt::perf::MpiCase;
using ibdt::perf::PackCase;

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ibdt::perf::CommonOptions options;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) options.quick = true;
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) options.reps = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--warmup") && i + 1 < argc) options.warmup = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--case") && i + 1 < argc) only = argv[++i];
  }
  const int reps = options.quick ? 3 : options.reps, warmup = options.quick ? 1 : options.warmup;
  for (const PackCase& pc : ibdt::perf::packCases(options.quick)) {
    if (!only.empty() && pc.name != only) continue;
    MpiCase c = ibdt::perf::buildMpiCase(pc);
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
