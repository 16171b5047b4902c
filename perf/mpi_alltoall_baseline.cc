// perf/mpi_alltoall_baseline.cc — the `ibdt-bench alltoall` experiment with
// MPI_Alltoall: contiguous MPI_BYTE blocks and strided blocks
// (MPI_Type_vector of int, resized) received as contiguous MPI_INT. Built
// once per MPI library found, run by ibdt-bench under the library's own
// launcher. After one checked exchange per row (every rank checks every
// byte), each repetition is a barrier, then calls alltoalls; its time is the
// slowest rank's. Rank 0 prints JSON lines:
//   {"library": "<MPI_Get_library_version>"}
//   {"row": "contig"|"vector"|"persistent contig"|"persistent vector", "ranks": p, "bytes": b,
//    "time": [median, min, max], "ci": [low, high], "dropped": n, "nvcsw": c, "nivcsw": c, "init": s}
// (seconds per alltoall after Tukey's filter, perf/report.h; the 95 % confidence
// interval of the median; voluntary and involuntary context switches per
// alltoall, the most of any rank; persistent rows: seconds per MPIX_Alltoall_init + MPI_Request_free).
// The persistent rows exist where the library has a persistent alltoall:
// MPI_Alltoall_init (MPI 4) or Open MPI's MPIX_Alltoall_init (mpi-ext.h).
// or {"error": "..."} (and exits non-zero).
// Usage: ibdt-mpi-alltoall-<mpi> --bytes 8,64 --reps N --warmup N [--rows contig,vector]
#include <mpi.h>
#include <sys/resource.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include <chrono>
#include <utility>
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

// The library's persistent alltoall, if it has one (checked at build time).
#if MPI_VERSION >= 4
#define IBDT_PERSISTENT_ALLTOALL_INIT MPI_Alltoall_init
#elif defined(OMPI_HAVE_MPI_EXT_PCOLLREQ) && OMPI_HAVE_MPI_EXT_PCOLLREQ
#define IBDT_PERSISTENT_ALLTOALL_INIT MPIX_Alltoall_init
#endif
#ifdef IBDT_PERSISTENT_ALLTOALL_INIT
constexpr bool kHavePersistent = true;
#else
constexpr bool kHavePersistent = false;
#endif

// Voluntary and involuntary context switches of this process so far.
std::pair<long, long> contextSwitches() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return {usage.ru_nvcsw, usage.ru_nivcsw};
}

struct Call {
  const void* send;
  int sendCount;
  MPI_Datatype sendType;
  void* recv;
  int recvCount;
  MPI_Datatype recvType;
};

// Seconds per persistent init + free (median over ranks' slowest), or 0.
double persistentInitSeconds(const Call& c) {
#ifdef IBDT_PERSISTENT_ALLTOALL_INIT
  std::vector<double> slowest;
  for (int rep = 0; rep < 20; ++rep) {
    MPI_Request request;
    const auto start = std::chrono::steady_clock::now();
    IBDT_PERSISTENT_ALLTOALL_INIT(c.send, c.sendCount, c.sendType, c.recv, c.recvCount, c.recvType, MPI_COMM_WORLD,
                                  MPI_INFO_NULL, &request);
    MPI_Request_free(&request);
    double mine = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), max = 0;
    MPI_Allreduce(&mine, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    slowest.push_back(max);
  }
  return summarize(slowest).median;
#else
  (void)c;
  return 0;
#endif
}

// Times one row (blocking MPI_Alltoall, or the persistent request started
// per call) and prints its line on rank 0.
void timeRow(int rank, int64_t bytes, bool vector, bool persistent, const Call& c, const Options& options) {
  const int calls = alltoallCallsPerRep(bytes), reps = alltoallRepsFor(bytes, options.reps);
  MPI_Request request = MPI_REQUEST_NULL;
  double init = 0;
#ifdef IBDT_PERSISTENT_ALLTOALL_INIT
  if (persistent) {
    init = persistentInitSeconds(c);
    IBDT_PERSISTENT_ALLTOALL_INIT(c.send, c.sendCount, c.sendType, c.recv, c.recvCount, c.recvType, MPI_COMM_WORLD,
                                  MPI_INFO_NULL, &request);
  }
#endif
  auto once = [&] {
    if (persistent) {
      MPI_Start(&request);
      MPI_Wait(&request, MPI_STATUS_IGNORE);
    } else {
      MPI_Alltoall(c.send, c.sendCount, c.sendType, c.recv, c.recvCount, c.recvType, MPI_COMM_WORLD);
    }
  };
  std::vector<double> slowest;
  double switches[2] = {0, 0};
  for (int rep = 0; rep < options.warmup + reps; ++rep) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto before = contextSwitches();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) once();
    double mine = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / calls, max = 0;
    if (rep >= options.warmup) {
      const auto after = contextSwitches();
      switches[0] += static_cast<double>(after.first - before.first);
      switches[1] += static_cast<double>(after.second - before.second);
    }
    MPI_Allreduce(&mine, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rep >= options.warmup) slowest.push_back(max);
  }
  if (request != MPI_REQUEST_NULL) MPI_Request_free(&request);
  const double timedCalls = static_cast<double>(reps) * calls;
  double perCall[2] = {switches[0] / timedCalls, switches[1] / timedCalls}, most[2] = {0, 0};
  MPI_Allreduce(perCall, most, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (rank != 0) return;
  const RobustSummary s = robustSummarize(slowest);
  std::string row = std::string(persistent ? "persistent " : "") + (vector ? "vector" : "contig");
  printLine({{"row", row}, {"bytes", bytes}, {"time", {s.median, s.min, s.max}}, {"ci", {s.ciLow, s.ciHigh}},
             {"dropped", s.dropped}, {"nvcsw", most[0]}, {"nivcsw", most[1]}, {"init", init}});
}

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
  ibdt::perf::AlltoallBuffer send, recv(static_cast<size_t>(bytes * size), 0);
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
  const Call call{send.data(), sendCount, sendType, recv.data(), recvCount, recvType};
  timeRow(rank, bytes, vector, false, call, options);
  if (kHavePersistent) timeRow(rank, bytes, vector, true, call, options);
  if (vector) MPI_Type_free(&sendType);
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
