// perf/mpi_alltoall_baseline.cc — the `ibdt-bench alltoall` experiment with
// MPI_Alltoall: contiguous MPI_BYTE blocks and strided blocks
// (MPI_Type_vector of int, resized) received as contiguous MPI_INT. Built
// once per MPI library found, run by ibdt-bench under the library's own
// launcher. After one checked exchange per row (every rank checks every
// byte), each repetition is a barrier, then calls alltoalls; its time is the
// slowest rank's. Rank 0 prints JSON lines:
//   {"library": "<MPI_Get_library_version>"}
//   {"row": "contig"|"vector", "ranks": p, "bytes": b, "time": [median, min, max]}   (seconds per alltoall)
// or {"error": "..."} (and exits non-zero).
// Usage: ibdt-mpi-alltoall-<mpi> --bytes 8,64 --reps N --warmup N [--rows contig,vector]
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "perf/alltoall_cases.h"
#include "perf/mpi_baseline_support.h"
#include "perf/report.h"

namespace {

using namespace ibdt::perf;

using Options = BaselineOptions;  // sizes: bytes per pair

// One row at one size; rank 0 prints its line. False when the data was wrong.
bool runRow(int rank, int size, int64_t bytes, bool vector, const Options& options) {
  MPI_Datatype sendType = MPI_BYTE, recvType = MPI_BYTE;
  int sendCount = static_cast<int>(bytes), recvCount = static_cast<int>(bytes);
  if (vector) {
    MPI_Datatype pieces;
    MPI_Type_vector(static_cast<int>(bytes / kAlltoallPiece), static_cast<int>(kAlltoallPiece / 4),
                    static_cast<int>(kAlltoallGap / 4), MPI_INT, &pieces);
    MPI_Type_create_resized(pieces, 0, alltoallSendExtent(true, bytes), &sendType);
    MPI_Type_free(&pieces);
    MPI_Type_commit(&sendType);
    sendCount = 1;
    recvType = MPI_INT;
    recvCount = static_cast<int>(bytes / 4);
  }
  std::vector<uint8_t> send, recv(static_cast<size_t>(bytes * size), 0);
  fillAlltoallSend(send, vector, bytes, size, rank);
  MPI_Alltoall(send.data(), sendCount, sendType, recv.data(), recvCount, recvType, MPI_COMM_WORLD);
  const std::string wrong = checkAlltoallReceive(recv, bytes, size, rank);
  int bad = wrong.empty() ? 0 : 1, anyBad = 0;
  MPI_Allreduce(&bad, &anyBad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (anyBad != 0) {
    if (!wrong.empty()) printLine({{"error", "MPI_Alltoall delivered wrong data: " + wrong}});
    if (vector) MPI_Type_free(&sendType);
    return false;
  }
  const int calls = alltoallCallsPerRep(bytes);
  std::vector<double> slowest;
  for (int rep = 0; rep < options.warmup + options.reps; ++rep) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) {
      MPI_Alltoall(send.data(), sendCount, sendType, recv.data(), recvCount, recvType, MPI_COMM_WORLD);
    }
    double mine = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / calls, max = 0;
    MPI_Allreduce(&mine, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rep >= options.warmup) slowest.push_back(max);
  }
  if (vector) MPI_Type_free(&sendType);
  if (rank == 0) {
    const Summary s = summarize(slowest);
    printLine({{"row", vector ? "vector" : "contig"}, {"ranks", size}, {"bytes", bytes},
               {"time", {s.median, s.min, s.max}}});
  }
  return true;
}

bool parse(int argc, char** argv, Options& options) {
  auto valid = [](long long bytes) {
    return bytes >= kAlltoallPiece && bytes % kAlltoallPiece == 0 && bytes <= (1 << 24);
  };
  return parseBaselineOptions(argc, argv, "--bytes", valid, alltoallBytes(false), options);
}

}  // namespace

int main(int argc, char** argv) {
  const World world = initWorld(&argc, &argv);
  const int rank = world.rank, size = world.size;
  Options options;
  if (!parse(argc, argv, options)) {
    return usageError(world, std::string("usage: ") + argv[0] +
                                 " --bytes 8,64 (multiples of 8) --reps N --warmup N [--rows contig,vector]");
  }
  if (rank == 0) printLibraryLine();
  bool ok = true;
  for (int vector = 0; vector < 2 && ok; ++vector) {
    if (!(vector ? options.vector : options.contig)) continue;
    for (int64_t bytes : options.sizes) {
      ok = runRow(rank, size, bytes, vector != 0, options);
      if (!ok) break;
    }
  }
  MPI_Finalize();
  return ok ? 0 : 1;
}
