// perf/mpi_vector_baseline.cc — the `ibdt-bench vector` experiment with MPI:
// x columns of a 128 x 4096 int array sent as MPI_Type_vector(128, x, 4096,
// MPI_INT), and the same bytes contiguous. Built once per MPI library found
// (Open MPI, MPICH) with that library's wrapper, run by ibdt-bench under the
// library's own launcher with two ranks. Rank 0 prints JSON lines:
//   {"library": "<MPI_Get_library_version>"}
//   {"row": "vector"|"contig", "x": x, "bytes": b,
//    "round_trip": [median, min, max], "window": [median, min, max]}   (seconds)
// or {"error": "..."} (and exits non-zero) when a transfer delivered wrong data.
// Usage: ibdt-mpi-vector-<mpi> --x 1,2,4 --reps N --warmup N [--rows vector,contig]
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "perf/mpi_baseline_support.h"
#include "perf/report.h"
#include "perf/vector_cases.h"

namespace {

using namespace ibdt::perf;

using Options = BaselineOptions;  // sizes: column counts x

// One message: the x columns (vector) or 128 * x ints (contig).
struct Message {
  void* data;
  int count;
  MPI_Datatype type;
};

class Experiment {
 public:
  Experiment(int rank, int64_t x) : rank_(rank), peer_(1 - rank), x_(x) {
    MPI_Type_vector(static_cast<int>(kVectorRows), static_cast<int>(x), static_cast<int>(kVectorColumns), MPI_INT,
                    &vector_);
    MPI_Type_commit(&vector_);
  }
  ~Experiment() { MPI_Type_free(&vector_); }
  Experiment(const Experiment&) = delete;
  Experiment& operator=(const Experiment&) = delete;

  // One checked transfer from rank 0 to rank 1 (both buffers patterned
  // first); returns "" or what rank 1 found wrong, on every rank.
  std::string check(bool contig) {
    fillVectorPattern(array_, rank_);
    fillContigPattern(packed_, x_, rank_);
    Message m = message(contig);
    if (rank_ == 0) {
      MPI_Send(m.data, m.count, m.type, peer_, 5, MPI_COMM_WORLD);
    } else {
      MPI_Recv(m.data, m.count, m.type, peer_, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    std::string error;
    if (rank_ == 1) error = contig ? checkContig(packed_, x_, 0) : checkVectorColumns(array_, x_, 0, 1);
    int length = static_cast<int>(error.size());
    MPI_Bcast(&length, 1, MPI_INT, 1, MPI_COMM_WORLD);
    error.resize(static_cast<size_t>(length));
    MPI_Bcast(error.data(), length, MPI_CHAR, 1, MPI_COMM_WORLD);
    return error;
  }

  void pingPong(bool contig) {
    Message m = message(contig);
    if (rank_ == 0) {
      MPI_Send(m.data, m.count, m.type, peer_, 1, MPI_COMM_WORLD);
      MPI_Recv(m.data, m.count, m.type, peer_, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(m.data, m.count, m.type, peer_, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(m.data, m.count, m.type, peer_, 1, MPI_COMM_WORLD);
    }
  }

  // kVectorWindow messages in flight, then a 4-byte ack back to the sender.
  void window(bool contig) {
    Message m = message(contig);
    MPI_Request requests[kVectorWindow];
    for (MPI_Request& request : requests) {
      if (rank_ == 0) {
        MPI_Isend(m.data, m.count, m.type, peer_, 2, MPI_COMM_WORLD, &request);
      } else {
        MPI_Irecv(m.data, m.count, m.type, peer_, 2, MPI_COMM_WORLD, &request);
      }
    }
    MPI_Waitall(kVectorWindow, requests, MPI_STATUSES_IGNORE);
    int32_t ack = 0;
    if (rank_ == 1) {
      MPI_Send(&ack, 1, MPI_INT, peer_, 3, MPI_COMM_WORLD);
    } else {
      MPI_Recv(&ack, 1, MPI_INT, peer_, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
  }

 private:
  Message message(bool contig) {
    if (contig) return {packed_.data(), static_cast<int>(kVectorRows * x_), MPI_INT};
    return {array_.data(), 1, vector_};
  }

  int rank_, peer_;
  int64_t x_;
  MPI_Datatype vector_ = MPI_DATATYPE_NULL;
  std::vector<int32_t> array_;   // the 128 x 4096 matrix
  std::vector<int32_t> packed_;  // the contiguous rows
};

nlohmann::json triple(const Summary& s) { return {s.median, s.min, s.max}; }

// Measures one row at one x; rank 0 prints its line.
bool runRow(int rank, int64_t x, bool contig, const Options& options) {
  Experiment experiment(rank, x);
  const char* name = contig ? "contig" : "vector";
  if (std::string error = experiment.check(contig); !error.empty()) {
    if (rank == 0) printLine({{"error", std::string("MPI ") + name + " row, " + error}});
    return false;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const Summary roundTrip = summarize(
      measure(options.warmup, options.reps, vectorPingPongsPerRep(x), [&] { experiment.pingPong(contig); }));
  MPI_Barrier(MPI_COMM_WORLD);
  const Summary window = summarize(measure(options.warmup, options.reps, 1, [&] { experiment.window(contig); }));
  if (rank == 0) {
    printLine({{"row", name}, {"x", x}, {"bytes", vectorBytes(x)}, {"round_trip", triple(roundTrip)},
               {"window", triple(window)}});
  }
  return true;
}

bool parse(int argc, char** argv, Options& options) {
  auto valid = [](long long x) { return x >= 1 && x <= kVectorColumns; };
  return parseBaselineOptions(argc, argv, "--x", valid, vectorColumnCounts(false), options);
}

}  // namespace

int main(int argc, char** argv) {
  const World world = initWorld(&argc, &argv);
  const int rank = world.rank;
  Options options;
  if (!parse(argc, argv, options) || world.size != 2) {
    return usageError(world, std::string("usage: ") + argv[0] +
                                 " --x 1,2,4 --reps N --warmup N [--rows vector,contig], on 2 ranks (got " +
                                 std::to_string(world.size) + ")");
  }
  if (rank == 0) printLibraryLine();
  bool ok = true;
  for (int contig = 0; contig < 2 && ok; ++contig) {
    if (!(contig ? options.contig : options.vector)) continue;
    for (int64_t x : options.sizes) {
      ok = runRow(rank, x, contig != 0, options);
      if (!ok) break;
    }
  }
  MPI_Finalize();
  return ok ? 0 : 1;
}
