// An unmodified MPI program (it links only MPI) run with and without
// LD_PRELOAD=libibdt_mpi_<mpi>.so: MPI_Alltoall on MPI_COMM_WORLD, on split
// and duplicated communicators (freed, then new ones made), with contiguous
// and derived types and MPI_IN_PLACE, and MPI_Pack of a vector. Every byte
// received is checked against what its sender meant, gaps included, so the
// run with ibdt must give exactly MPI's own results. At the end it asks the
// preloaded library (if any) what it took:
//   --expect ibdt      : the library is loaded and ran the alltoalls and packs
//   --expect mpi       : all went to MPI (not preloaded, or IBDT_MPI=off)
//   --expect untouched : p2p and other collectives only; nothing intercepted
#include <dlfcn.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int failures = 0;
int worldRank = 0;

void check(bool ok, const std::string& what) {
  if (ok) return;
  ++failures;
  std::fprintf(stderr, "rank %d: FAILED: %s\n", worldRank, what.c_str());
}

// The int that rank `from` sends as element `i` of its block for rank `to`.
int value(int from, int to, int i) { return from * 1000003 + to * 7919 + i; }

// Contiguous ints, `n` per peer.
void contiguous(MPI_Comm comm, int n, const char* name) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  std::vector<int> send(static_cast<size_t>(n) * size), recv(send.size(), -1);
  // Twice with the same arguments and new data: the second call reruns the
  // first one's plan.
  for (int round = 0; round < 2; ++round) {
    for (int to = 0; to < size; ++to)
      for (int i = 0; i < n; ++i) send[static_cast<size_t>(to) * n + i] = value(rank, to, i) + round * 17;
    check(MPI_Alltoall(send.data(), n, MPI_INT, recv.data(), n, MPI_INT, comm) == MPI_SUCCESS, "alltoall rc");
    for (int from = 0; from < size; ++from)
      for (int i = 0; i < n; ++i)
        check(recv[static_cast<size_t>(from) * n + i] == value(from, rank, i) + round * 17,
              std::string(name) + " contiguous n=" + std::to_string(n) + " round " + std::to_string(round) +
                  " from " + std::to_string(from));
  }
}

// Sends a strided vector (2 of every 5 ints, 3 blocks, 2 per peer) and
// receives into a resized vector with gaps: the gaps must keep -7.
void derived(MPI_Comm comm, const char* name) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  MPI_Datatype sendType, recvVector, recvType;
  MPI_Type_vector(3, 2, 5, MPI_INT, &sendType);  // 6 ints over an extent of 12
  MPI_Type_commit(&sendType);
  MPI_Type_vector(6, 1, 2, MPI_INT, &recvVector);  // 6 ints, every other one
  MPI_Type_create_resized(recvVector, 0, 12 * sizeof(int), &recvType);
  MPI_Type_commit(&recvType);
  const int perPeer = 2;  // elements of each type per peer: 12 ints
  std::vector<int> send(static_cast<size_t>(size) * perPeer * 12, -1), recv(send.size(), -7);
  for (int to = 0; to < size; ++to)
    for (int e = 0; e < perPeer; ++e)
      for (int b = 0; b < 3; ++b)
        for (int k = 0; k < 2; ++k)
          send[static_cast<size_t>((to * perPeer + e) * 12 + b * 5 + k)] = value(rank, to, e * 6 + b * 2 + k);
  check(MPI_Alltoall(send.data(), perPeer, sendType, recv.data(), perPeer, recvType, comm) == MPI_SUCCESS,
        "derived alltoall rc");
  for (int from = 0; from < size; ++from)
    for (int e = 0; e < perPeer; ++e)
      for (int j = 0; j < 12; ++j) {
        const int got = recv[static_cast<size_t>((from * perPeer + e) * 12 + j)];
        const int want = j % 2 == 0 ? value(from, rank, e * 6 + j / 2) : -7;
        check(got == want, std::string(name) + " derived from " + std::to_string(from) + " at " + std::to_string(j));
      }
  MPI_Type_free(&sendType);
  MPI_Type_free(&recvVector);
  MPI_Type_free(&recvType);
}

void inPlace(MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int n = 3;
  std::vector<int> buffer(static_cast<size_t>(n) * size);
  for (int to = 0; to < size; ++to)
    for (int i = 0; i < n; ++i) buffer[static_cast<size_t>(to) * n + i] = value(rank, to, i);
  MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buffer.data(), n, MPI_INT, comm);
  for (int from = 0; from < size; ++from)
    for (int i = 0; i < n; ++i)
      check(buffer[static_cast<size_t>(from) * n + i] == value(from, rank, i), "in-place from " + std::to_string(from));
}

void pack() {
  double matrix[40];
  for (int i = 0; i < 40; ++i) matrix[i] = i * 1.5;
  MPI_Datatype column;
  MPI_Type_vector(8, 1, 5, MPI_DOUBLE, &column);
  MPI_Type_commit(&column);
  int size = 0, position = 0;
  MPI_Pack_size(2, column, MPI_COMM_WORLD, &size);
  check(size >= 16 * 8, "MPI_Pack_size");
  std::vector<char> packed(static_cast<size_t>(size));
  MPI_Pack(matrix, 1, column, packed.data(), size, &position, MPI_COMM_WORLD);
  MPI_Pack(matrix + 1, 1, column, packed.data(), size, &position, MPI_COMM_WORLD);
  check(position == 128, "pack position");
  for (int i = 0; i < 16; ++i) {
    double got;
    std::memcpy(&got, packed.data() + 8 * i, 8);
    check(got == matrix[(i % 8) * 5 + i / 8], "packed element " + std::to_string(i));
  }
  double back[40] = {};
  position = 0;
  MPI_Unpack(packed.data(), size, &position, back, 1, column, MPI_COMM_WORLD);
  for (int i = 0; i < 40; ++i) check(back[i] == (i % 5 == 0 ? matrix[i] : 0.0), "unpacked element " + std::to_string(i));
  MPI_Type_free(&column);
}

void untouched() {  // point-to-point and collectives the library does not take
  int size;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int token = worldRank == 0 ? 42 : -1;
  if (worldRank == 0) {
    for (int r = 1; r < size; ++r) MPI_Send(&token, 1, MPI_INT, r, 5, MPI_COMM_WORLD);
  } else {
    MPI_Recv(&token, 1, MPI_INT, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  check(token == 42, "send/recv");
  int sum = 0, one = worldRank + 1;
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  check(sum == size * (size + 1) / 2, "allreduce");
  MPI_Barrier(MPI_COMM_WORLD);
}

struct Counters {  // ibdt_mpi.h's IBDT_Mpi_counters (this program does not include ibdt)
  unsigned long long alltoallIbdt, alltoallMpi, packIbdt, packMpi;
};

void expect(const std::string& mode) {
  using Get = void (*)(Counters*);
  auto get = reinterpret_cast<Get>(dlsym(RTLD_DEFAULT, "IBDT_Mpi_get_counters"));
  Counters c{};
  if (get) get(&c);
  if (mode == "ibdt") {
    check(get != nullptr, "the ibdt library is not loaded");
    check(c.alltoallIbdt >= 20, "ibdt ran " + std::to_string(c.alltoallIbdt) + " alltoalls, expected >= 20");
    check(c.alltoallMpi == 0, std::to_string(c.alltoallMpi) + " alltoalls (MPI_IN_PLACE included) were handed to MPI");
    check(c.packIbdt >= 3, "ibdt ran " + std::to_string(c.packIbdt) + " packs, expected 3");
  } else {
    check(c.alltoallIbdt == 0 && c.packIbdt == 0, "ibdt ran calls in mode " + mode);
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &worldRank);
  const std::string mode = argc > 2 && !std::strcmp(argv[1], "--expect") ? argv[2] : "";
  if (mode != "ibdt" && mode != "mpi" && mode != "untouched") {
    if (worldRank == 0) std::fprintf(stderr, "usage: %s --expect ibdt|mpi|untouched\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  untouched();
  if (mode != "untouched") {
    for (int n : {1, 100, 20000}) contiguous(MPI_COMM_WORLD, n, "world");  // eager to rendezvous
    derived(MPI_COMM_WORLD, "world");
    MPI_Comm split, dup;
    MPI_Comm_split(MPI_COMM_WORLD, worldRank % 2, -worldRank, &split);  // reversed rank order
    contiguous(split, 50, "split");
    derived(split, "split");
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    contiguous(dup, 7, "dup");
    MPI_Comm_free(&dup);  // closes its ibdt state
    MPI_Comm_free(&split);
    MPI_Comm_split(MPI_COMM_WORLD, worldRank < 2 ? 0 : 1, worldRank, &split);  // may reuse the freed handles
    contiguous(split, 5000, "second split");
    derived(split, "second split");
    contiguous(MPI_COMM_WORLD, 3, "world again");
    derived(MPI_COMM_WORLD, "world again");
    contiguous(MPI_COMM_SELF, 4, "self");
    MPI_Comm_free(&split);
    inPlace(MPI_COMM_WORLD);
    pack();
  }
  expect(mode);
  int failed = 0;
  MPI_Allreduce(&failures, &failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (worldRank == 0) std::printf("%s: %d failure(s) across ranks\n", mode.c_str(), failed);
  MPI_Finalize();
  return failed == 0 ? 0 : 1;
}
