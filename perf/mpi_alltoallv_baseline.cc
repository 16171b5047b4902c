// perf/mpi_alltoallv_baseline.cc — the `ibdt-bench alltoallv` experiment
// with MPI_Alltoallv (perf/alltoallv_cases.h): out of place, and with
// MPI_IN_PLACE on the symmetric distributions (MPI's in-place rule). Built
// once per MPI library found, run by ibdt-bench under the library's own
// launcher. After one checked exchange per row (every rank checks every
// byte), each repetition is a barrier, then calls exchanges; its time is the
// slowest rank's. Rank 0 prints JSON lines:
//   {"library": "<MPI_Get_library_version>"}
//   {"row": "alltoallv"|"in-place", "dist": d, "ranks": p, "bytes": mean, "time": [median, min, max]}
// or {"error": "..."} (and exits non-zero).
// Usage: ibdt-mpi-alltoallv-<mpi> --bytes 64,4096 --reps N --warmup N [--dists regular,uniform]
#include <mpi.h>

#include <chrono>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "perf/alltoallv_cases.h"
#include "perf/mpi_baseline_support.h"
#include "perf/report.h"

namespace {

using namespace ibdt::perf;

struct Options {
  std::vector<int64_t> means;
  std::vector<std::string> dists;
  int reps = 15;
  int warmup = 3;
};

std::vector<int> toInt(const std::vector<int64_t>& values) { return {values.begin(), values.end()}; }

// One row; rank 0 prints its line. False when the data was wrong.
bool runRow(int rank, int size, const std::string& dist, int64_t mean, bool inPlace, const Options& options) {
  const AlltoallvLayout layout = alltoallvLayout(dist, mean, size, rank);
  const std::vector<int> sc = toInt(layout.sendcounts), sd = toInt(layout.sdispls), rc = toInt(layout.recvcounts),
                         rd = toInt(layout.rdispls);
  std::vector<uint8_t> send(static_cast<size_t>(std::max<int64_t>(1, layout.sendTotal)), 0);
  std::vector<uint8_t> recv(static_cast<size_t>(std::max(layout.sendTotal, layout.recvTotal) + 1), 0);
  auto once = [&] {
    if (inPlace) {
      MPI_Alltoallv(MPI_IN_PLACE, nullptr, nullptr, MPI_BYTE, recv.data(), rc.data(), rd.data(), MPI_BYTE,
                    MPI_COMM_WORLD);
    } else {
      MPI_Alltoallv(send.data(), sc.data(), sd.data(), MPI_BYTE, recv.data(), rc.data(), rd.data(), MPI_BYTE,
                    MPI_COMM_WORLD);
    }
  };
  fillAlltoallvSend(inPlace ? recv : send, layout, rank);
  once();
  const std::string wrong = checkAlltoallvReceive(recv, layout, rank);
  int bad = wrong.empty() ? 0 : 1, anyBad = 0;
  MPI_Allreduce(&bad, &anyBad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (anyBad != 0) {
    if (!wrong.empty()) printLine({{"error", "MPI_Alltoallv delivered wrong data: " + wrong}});
    return false;
  }
  const int calls = alltoallvCallsPerRep(mean);
  std::vector<double> slowest;
  for (int rep = 0; rep < options.warmup + options.reps; ++rep) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) once();
    double mine = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / calls, max = 0;
    MPI_Allreduce(&mine, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rep >= options.warmup) slowest.push_back(max);
  }
  if (rank == 0) {
    const Summary s = summarize(slowest);
    printLine({{"row", inPlace ? "in-place" : "alltoallv"}, {"dist", dist}, {"ranks", size}, {"bytes", mean},
               {"time", {s.median, s.min, s.max}}});
  }
  return true;
}

bool parse(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    if (parseRepetitionOption(argc, argv, i, options.reps, options.warmup)) continue;
    if (i + 1 >= argc) return false;
    std::istringstream list(argv[i + 1]);
    if (!std::strcmp(argv[i], "--bytes")) {
      for (std::string item; std::getline(list, item, ',');) options.means.push_back(std::atoll(item.c_str()));
    } else if (!std::strcmp(argv[i], "--dists")) {
      for (std::string item; std::getline(list, item, ',');) options.dists.push_back(item);
    } else {
      return false;
    }
    ++i;
  }
  if (options.means.empty()) options.means = alltoallvMeans(false);
  if (options.dists.empty()) options.dists = alltoallvDistributions();
  for (int64_t mean : options.means) {
    if (mean < 1 || mean > (1 << 22)) return false;
  }
  return options.reps > 0 && options.warmup >= 0;
}

}  // namespace

int main(int argc, char** argv) {
  const World world = initWorld(&argc, &argv);
  Options options;
  if (!parse(argc, argv, options)) {
    return usageError(world, std::string("usage: ") + argv[0] +
                                 " --bytes 64,4096 --reps N --warmup N [--dists regular,uniform,powerlaw,hot]");
  }
  if (world.rank == 0) printLibraryLine();
  bool ok = true;
  for (const std::string& dist : options.dists) {
    for (int64_t mean : options.means) {
      for (bool inPlace : {false, true}) {
        if (inPlace && !alltoallvSymmetric(dist)) continue;
        if (ok) ok = runRow(world.rank, world.size, dist, mean, inPlace, options);
      }
    }
  }
  MPI_Finalize();
  return ok ? 0 : 1;
}
