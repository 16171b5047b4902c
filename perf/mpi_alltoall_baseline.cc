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

struct Options {
  std::vector<int64_t> bytes;
  int reps = 15;
  int warmup = 3;
  bool contig = true;
  bool vector = true;
};

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
  for (int i = 1; i < argc; ++i) {
    const bool hasValue = i + 1 < argc;
    if (parseRepetitionOption(argc, argv, i, options.reps, options.warmup)) continue;
    if (parseRowsOption(argc, argv, i, options.vector, options.contig)) continue;
    if (!std::strcmp(argv[i], "--bytes") && hasValue) {
      auto valid = [](long long bytes) {
        return bytes >= kAlltoallPiece && bytes % kAlltoallPiece == 0 && bytes <= (1 << 24);
      };
      if (!parseIntegerList(argv[++i], options.bytes, valid)) return false;
    } else {
      return false;
    }
  }
  if (options.bytes.empty()) options.bytes = alltoallBytes(false);
  return options.reps > 0 && options.warmup >= 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  Options options;
  if (!parse(argc, argv, options)) {
    if (rank == 0) {
      printLine({{"error", std::string("usage: ") + argv[0] +
                               " --bytes 8,64 (multiples of 8) --reps N --warmup N [--rows contig,vector]"}});
    }
    MPI_Finalize();
    return 2;
  }
  if (rank == 0) printLibraryLine();
  bool ok = true;
  for (int vector = 0; vector < 2 && ok; ++vector) {
    if (!(vector ? options.vector : options.contig)) continue;
    for (int64_t bytes : options.bytes) {
      ok = runRow(rank, size, bytes, vector != 0, options);
      if (!ok) break;
    }
  }
  MPI_Finalize();
  return ok ? 0 : 1;
}
