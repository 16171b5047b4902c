// An unmodified MPI program (it links only MPI) run with and without
// LD_PRELOAD=libibdt_mpi_<mpi>.so: MPI_Alltoall on MPI_COMM_WORLD, on split
// and duplicated communicators (freed, then new ones made), with contiguous
// and derived types and MPI_IN_PLACE, ranks that reuse buffers while others
// reallocate, a negative-extent type on one rank, MPI_Alltoallv (irregular
// counts, gaps, derived, in place, split), MPI_Ialltoall completed by every
// wait and test form and by polling MPI_Request_get_status, MPI_Ialltoallv,
// the persistent alltoall, non-blocking calls whose types ibdt takes
// directly on some ranks only, and MPI_Pack of a vector. Every byte
// received is checked against what its sender meant, gaps included, so the
// run with ibdt must give exactly MPI's own results. At the end it asks the
// preloaded library (if any) what it took:
//   --expect ibdt      : the library is loaded and ran the alltoalls and packs
//   --expect mpi       : all went to MPI (not preloaded, or IBDT_MPI=off)
//   --expect untouched : p2p and other collectives only; nothing intercepted
#include <dlfcn.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "interpose_checks.h"

namespace {

using interpose_test::check;
using interpose_test::failures;
using interpose_test::value;
using interpose_test::worldRank;

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

// The same buffers and counts with a receive type freed and created anew
// each round (MPI usually hands out the freed handle again), its stride
// changing: the bridge's repeated-call shortcut (mpi/alltoall_call.h) must
// not run the previous round's plan. Each round calls twice (the shortcut
// taken); the gaps of the 6-int slots must keep -7.
void reusedTypeHandles(MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  std::vector<int> send(static_cast<size_t>(size) * 2), recv(static_cast<size_t>(size) * 6);
  for (int round = 0; round < 3; ++round) {
    const int stride = 1 + round;
    MPI_Datatype vector, slot;
    MPI_Type_vector(2, 1, stride, MPI_INT, &vector);
    MPI_Type_create_resized(vector, 0, 6 * sizeof(int), &slot);
    MPI_Type_commit(&slot);
    for (int call = 0; call < 2; ++call) {
      for (int to = 0; to < size; ++to)
        for (int k = 0; k < 2; ++k) send[static_cast<size_t>(to * 2 + k)] = value(rank, to, k) + round + call;
      std::fill(recv.begin(), recv.end(), -7);
      check(MPI_Alltoall(send.data(), 2, MPI_INT, recv.data(), 1, slot, comm) == MPI_SUCCESS, "reused type rc");
      for (int from = 0; from < size; ++from)
        for (int j = 0; j < 6; ++j) {
          const bool element = j % stride == 0 && j / stride < 2;
          const int want = element ? value(from, rank, j / stride) + round + call : -7;
          check(recv[static_cast<size_t>(from * 6 + j)] == want,
                "reused type handle, round " + std::to_string(round) + " from " + std::to_string(from));
        }
    }
    MPI_Type_free(&slot);  // then the vector: the next round's slot tends to get this handle
    MPI_Type_free(&vector);
  }
}

// Ranks that disagree about reuse: rank 0 keeps its buffers for every call,
// the others allocate new ones each call, over more distinct sizes than the
// bridge caches plans (8), so one rank starts a cached plan while another
// builds or has evicted it. No call agrees collectively (mpi/alltoall_call.h),
// except on the first call of each block size large enough that ibdt's
// choice is direct-write (`smallest` 16384 ints: 11 sizes, more than the 4
// direct-write plans kept, so they are evicted and built again together).
void disagreeingCaches(MPI_Comm comm, int smallest, int calls) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  std::vector<int> keptSend(static_cast<size_t>(size) * (smallest + 30)), keptRecv(keptSend.size());
  for (int call = 0; call < calls; ++call) {
    const int n = smallest + (call * 7) % 11 * 3;  // 11 sizes, up to 30 ints above the smallest
    std::vector<int> freshSend(static_cast<size_t>(size) * n), freshRecv(freshSend.size());
    int* send = rank == 0 ? keptSend.data() : freshSend.data();
    int* recv = rank == 0 ? keptRecv.data() : freshRecv.data();
    for (int to = 0; to < size; ++to)
      for (int i = 0; i < n; ++i) send[to * n + i] = value(rank, to, i) + call;
    for (int i = 0; i < size * n; ++i) recv[i] = -1;
    check(MPI_Alltoall(send, n, MPI_INT, recv, n, MPI_INT, comm) == MPI_SUCCESS, "disagreeing alltoall rc");
    for (int from = 0; from < size; ++from)
      for (int i = 0; i < n; ++i)
        check(recv[from * n + i] == value(from, rank, i) + call,
              "call " + std::to_string(call) + " from " + std::to_string(from));
  }
}

// A type whose layout ibdt cannot express (negative extent: the elements go
// backwards from the buffer's address) on one rank only, as the send type on
// rank 0 and the receive type on rank 1; the other types are MPI_INT.
// `how` 0: rank 0's send and rank 1's receive type is backwards; 1: both of
// rank 0's types (neither converts there, and rank 0 must still take part
// in ibdt's exchange, not hand its call to MPI); 2: MPI_IN_PLACE with the
// backwards type on rank 0. `n` ints per pair, twice on the same buffers:
// with 20000 (ibdt's choice direct-write) the rank that cannot lay out its
// type stages it through PMPI_Pack into a dense buffer the plan writes
// from or into, while the others run the same plan on their own buffers,
// on the repeated call too.
void negativeExtent(MPI_Comm comm, int how, int n) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  MPI_Datatype backwards;
  MPI_Type_create_resized(MPI_INT, 0, -static_cast<MPI_Aint>(sizeof(int)), &backwards);
  MPI_Type_commit(&backwards);
  const int total = n * size;
  std::vector<int> send(static_cast<size_t>(total)), recv(static_cast<size_t>(total));
  // Element e of a backwards buffer is at index total - 1 - e.
  auto at = [&](bool isBackwards, int e) { return isBackwards ? total - 1 - e : e; };
  const bool sendBackwards = rank == 0, recvBackwards = how == 0 ? rank == 1 : rank == 0;
  std::vector<int>& out = how == 2 ? recv : send;
  for (int call = 0; call < 2; ++call) {
    std::fill(recv.begin(), recv.end(), -1);
    for (int to = 0; to < size; ++to)
      for (int i = 0; i < n; ++i) out[static_cast<size_t>(at(sendBackwards, to * n + i))] = value(rank, to, i) + call;
    const void* sendbuf = how == 2 ? MPI_IN_PLACE : sendBackwards ? &send[total - 1] : send.data();
    check(MPI_Alltoall(sendbuf, n, sendBackwards ? backwards : MPI_INT, recvBackwards ? &recv[total - 1] : recv.data(),
                       n, recvBackwards ? backwards : MPI_INT, comm) == MPI_SUCCESS,
          "negative-extent alltoall rc");
    int wrong = 0;
    for (int from = 0; from < size; ++from)
      for (int i = 0; i < n; ++i)
        wrong += recv[static_cast<size_t>(at(recvBackwards, from * n + i))] != value(from, rank, i) + call;
    check(wrong == 0, "negative extent (" + std::to_string(how) + ", " + std::to_string(n) + " ints): " +
                          std::to_string(wrong) + " wrong");
  }
  MPI_Type_free(&backwards);
}

// MPI_Alltoallv with irregular counts (zeros included), blocks placed in
// reverse peer order with a gap of one int after each, which must stay -1;
// `elementInts` > 1 sends contiguous(elementInts, MPI_INT) received as ints.
void alltoallv(MPI_Comm comm, int elementInts, const char* name) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  auto ints = [](int from, int to) { return (from + 2 * to) % 4 * 3 + (from == to ? 1 : 0); };
  MPI_Datatype element = MPI_INT;
  if (elementInts > 1) {
    MPI_Type_contiguous(elementInts, MPI_INT, &element);
    MPI_Type_commit(&element);
  }
  std::vector<int> scounts(size), sdispls(size), rcounts(size), rdispls(size);
  int sendInts = 0, recvInts = 0;
  for (int peer = size - 1; peer >= 0; --peer) {  // reverse order, one int of gap
    scounts[peer] = ints(rank, peer);  // in elements of `element`
    sdispls[peer] = sendInts / elementInts;
    sendInts += (scounts[peer] + 1) * elementInts;
    rcounts[peer] = ints(peer, rank) * elementInts;
    rdispls[peer] = recvInts;
    recvInts += rcounts[peer] + 1;
  }
  std::vector<int> send(static_cast<size_t>(sendInts), -3), recv(static_cast<size_t>(recvInts), -1);
  for (int round = 0; round < 2; ++round) {  // the same arguments twice: the plan started again
    for (int to = 0; to < size; ++to)
      for (int i = 0; i < scounts[to] * elementInts; ++i)
        send[sdispls[to] * elementInts + i] = value(rank, to, i) + round;
    std::fill(recv.begin(), recv.end(), -1);
    check(MPI_Alltoallv(send.data(), scounts.data(), sdispls.data(), element, recv.data(), rcounts.data(),
                        rdispls.data(), MPI_INT, comm) == MPI_SUCCESS,
          "alltoallv rc");
    for (int from = 0; from < size; ++from) {
      for (int i = 0; i < rcounts[from]; ++i)
        check(recv[rdispls[from] + i] == value(from, rank, i) + round,
              std::string(name) + " from " + std::to_string(from));
      check(recv[rdispls[from] + rcounts[from]] == -1, std::string(name) + " gap after " + std::to_string(from));
    }
  }
  if (element != MPI_INT) MPI_Type_free(&element);
}

// MPI_Alltoallv with MPI_IN_PLACE: symmetric counts (as MPI requires),
// blocks in peer order.
void alltoallvInPlace(MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  std::vector<int> counts(size), displs(size);
  int total = 0;
  for (int peer = 0; peer < size; ++peer) {
    counts[peer] = (rank + peer) % 3 * 5 + 1;
    displs[peer] = total;
    total += counts[peer];
  }
  std::vector<int> buffer(static_cast<size_t>(total));
  for (int to = 0; to < size; ++to)
    for (int i = 0; i < counts[to]; ++i) buffer[displs[to] + i] = value(rank, to, i);
  check(MPI_Alltoallv(MPI_IN_PLACE, nullptr, nullptr, MPI_DATATYPE_NULL, buffer.data(), counts.data(),
                      displs.data(), MPI_INT, comm) == MPI_SUCCESS,
        "in-place alltoallv rc");
  for (int from = 0; from < size; ++from)
    for (int i = 0; i < counts[from]; ++i)
      check(buffer[displs[from] + i] == value(from, rank, i), "in-place alltoallv from " + std::to_string(from));
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
  unsigned long long alltoallIbdt, alltoallMpi, packIbdt, packMpi, alltoallvIbdt, alltoallvMpi, ialltoallIbdt,
      ialltoallMpi;
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
    check(c.alltoallvIbdt >= 4 && c.alltoallvMpi == 0, "ibdt ran " + std::to_string(c.alltoallvIbdt) +
                                                           " alltoallvs, expected 4; MPI ran " +
                                                           std::to_string(c.alltoallvMpi));
    // 31 here and there, 65 MPI_Ialltoallv in alltoallvReuse(..., true).
    check(c.ialltoallIbdt == 96 && c.ialltoallMpi == 0, "ibdt ran " + std::to_string(c.ialltoallIbdt) +
                                                            " ialltoall(v)s and inits, expected 96; MPI ran " +
                                                            std::to_string(c.ialltoallMpi));
  } else {
    check(c.alltoallIbdt == 0 && c.packIbdt == 0 && c.alltoallvIbdt == 0 && c.ialltoallIbdt == 0,
          "ibdt ran calls in mode " + mode);
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
    disagreeingCaches(MPI_COMM_WORLD, 1, 30);
    disagreeingCaches(MPI_COMM_WORLD, 16384, 6);
    interpose_test::directWriteAlltoall(MPI_COMM_WORLD);
    reusedTypeHandles(MPI_COMM_WORLD);
    for (int how = 0; how < 3; ++how)
      for (int n : {2, 20000}) negativeExtent(MPI_COMM_WORLD, how, n);
    alltoallv(MPI_COMM_WORLD, 1, "alltoallv");
    alltoallv(MPI_COMM_WORLD, 2, "alltoallv of pairs");
    alltoallvInPlace(MPI_COMM_WORLD);
    interpose_test::alltoallvReuse(MPI_COMM_WORLD, false);
    interpose_test::alltoallvReuse(MPI_COMM_WORLD, true);
    if (mode == "ibdt") interpose_test::alltoallvMismatch(MPI_COMM_WORLD);
    interpose_test::alltoallvInPlaceReuse(MPI_COMM_WORLD);
    if (mode == "ibdt") interpose_test::alltoallvInPlaceMismatch(MPI_COMM_WORLD);
#if defined(OPEN_MPI)
    interpose_test::alltoallvInPlaceDerived(MPI_COMM_WORLD, true);
#else
    interpose_test::alltoallvInPlaceDerived(MPI_COMM_WORLD, mode == "ibdt");
#endif
    interpose_test::signaturelessTypes(MPI_COMM_WORLD);
    for (int how = 0; how < 5; ++how) interpose_test::ialltoall(MPI_COMM_WORLD, how);
    interpose_test::ialltoallBesidePeerSend(MPI_COMM_WORLD);
    interpose_test::requestGetStatus(MPI_COMM_WORLD);
#if defined(OPEN_MPI)
    interpose_test::persistentAlltoall(MPI_COMM_WORLD, true);
#else
    interpose_test::persistentAlltoall(MPI_COMM_WORLD, mode == "ibdt");
#endif
    interpose_test::persistentAlltoallv(MPI_COMM_WORLD);
    interpose_test::mixedTypes(MPI_COMM_WORLD, mode == "ibdt");
    MPI_Comm_split(MPI_COMM_WORLD, worldRank % 2, -worldRank, &split);
    alltoallv(split, 1, "split alltoallv");
    MPI_Comm_free(&split);
    pack();
  }
  expect(mode);
  int failed = 0;
  MPI_Allreduce(&failures, &failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (worldRank == 0) std::printf("%s: %d failure(s) across ranks\n", mode.c_str(), failed);
  MPI_Finalize();
  return failed == 0 ? 0 : 1;
}
