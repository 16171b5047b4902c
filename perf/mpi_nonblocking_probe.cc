// A probe of the MPI bridge's non-blocking and persistent alltoall waits
// (docs/mpi.md, "Non-blocking and persistent alltoall"): per size, the time
// of one MPI_Alltoall, MPI_Ialltoall + MPI_Wait and MPI_Start + MPI_Wait on
// a persistent alltoall, each the median (min, max) over samples of `calls`
// calls. Run under mpirun with and without the bridge preloaded; built per
// MPI by its compiler wrapper (target ibdt-mpi-nonblocking-probe-<mpi>).
// Usage: mpi_nonblocking_probe [samples] [calls] [only bytes] [only way: 0 blocking, 1 ialltoall, 2 start]
#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#if MPI_VERSION >= 4
#define PROBE_ALLTOALL_INIT MPI_Alltoall_init
#else
#define PROBE_ALLTOALL_INIT MPIX_Alltoall_init
#endif

enum Way { kBlocking, kNonblocking, kPersistent };

double sample(Way way, std::vector<char>& send, std::vector<char>& recv, int bytes, MPI_Request persistent, int calls) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int c = 0; c < calls; ++c) {
    MPI_Request request;
    switch (way) {
      case kBlocking: MPI_Alltoall(send.data(), bytes, MPI_BYTE, recv.data(), bytes, MPI_BYTE, MPI_COMM_WORLD); break;
      case kNonblocking:
        MPI_Ialltoall(send.data(), bytes, MPI_BYTE, recv.data(), bytes, MPI_BYTE, MPI_COMM_WORLD, &request);
        MPI_Wait(&request, MPI_STATUS_IGNORE);
        break;
      case kPersistent:
        MPI_Start(&persistent);
        MPI_Wait(&persistent, MPI_STATUS_IGNORE);
        break;
    }
  }
  double mine = (MPI_Wtime() - start) / calls, most = 0;
  MPI_Allreduce(&mine, &most, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return most;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int samples = argc > 1 ? std::atoi(argv[1]) : 15;
  const int calls = argc > 2 ? std::atoi(argv[2]) : 200;
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int onlyBytes = argc > 3 ? std::atoi(argv[3]) : 0;
  const int onlyWay = argc > 4 ? std::atoi(argv[4]) : -1;
  const char* names[] = {"blocking", "ialltoall+wait", "start+wait"};
  for (int bytes : onlyBytes != 0 ? std::vector<int>{onlyBytes} : std::vector<int>{8, 65536}) {
    std::vector<char> send(static_cast<size_t>(bytes) * size, static_cast<char>(rank)), recv(send.size());
    MPI_Request persistent;
    PROBE_ALLTOALL_INIT(send.data(), bytes, MPI_BYTE, recv.data(), bytes, MPI_BYTE, MPI_COMM_WORLD, MPI_INFO_NULL,
                        &persistent);
    for (Way way : {kBlocking, kNonblocking, kPersistent}) {
      if (onlyWay >= 0 && way != onlyWay) continue;
      (void)sample(way, send, recv, bytes, persistent, calls / 4 + 1);  // warm-up
      std::vector<double> t;
      for (int s = 0; s < samples; ++s) t.push_back(sample(way, send, recv, bytes, persistent, calls) * 1e6);
      std::sort(t.begin(), t.end());
      for (int r = 0; r < size; ++r)
        if (recv[static_cast<size_t>(r) * bytes] != static_cast<char>(r)) std::abort();
      if (rank == 0)
        std::printf("%6d B %-15s median %8.2f us  min %8.2f  max %8.2f\n", bytes, names[way], t[t.size() / 2], t.front(),
                    t.back());
    }
    MPI_Request_free(&persistent);
  }
  MPI_Finalize();
}
