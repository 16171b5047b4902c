// Blocking alltoall(v) with a type ibdt has no signature for (MPI_REAL16:
// no 16-byte real among ibdt's basic types) on some ranks only. Such a
// side travels as bytes (mpi/staging.cc); before, it went to MPI on those
// ranks only while the others waited in ibdt's exchange: a hang, bounded
// here by the launcher's timeout. Every received byte and gap is checked.
#include <mpi.h>

#include <cstring>
#include <string>
#include <vector>

#include "interpose_checks.h"

namespace interpose_test {
namespace {

constexpr int kReal16 = 16;  // bytes of one MPI_REAL16

// Ints `from` sends `to` in the first case: rank 0 sends none (its type is
// MPI_REAL16, zero counts), everyone else some.
int intsOf(int from, int to) { return from == 0 ? 0 : (from + to) % 3 + 1; }

// Case 1: rank 0's send type is MPI_REAL16 with zero counts, every other
// side MPI_INT.
void zeroCountSide(MPI_Comm comm, int rank, int size) {
  std::vector<int> sc(size), sd(size), rc(size), rd(size), send, recv;
  for (int peer = 0; peer < size; ++peer) {
    sc[peer] = intsOf(rank, peer);
    sd[peer] = static_cast<int>(send.size());
    for (int i = 0; i < sc[peer]; ++i) send.push_back(value(rank, peer, i));
    send.push_back(-2);
    rc[peer] = intsOf(peer, rank);
    rd[peer] = static_cast<int>(recv.size());
    recv.resize(recv.size() + static_cast<size_t>(rc[peer]) + 1, -1);  // one int of gap
  }
  const MPI_Datatype sendtype = rank == 0 ? MPI_REAL16 : MPI_INT;
  check(MPI_Alltoallv(send.data(), sc.data(), sd.data(), sendtype, recv.data(), rc.data(), rd.data(), MPI_INT,
                      comm) == MPI_SUCCESS,
        "signatureless zero-count alltoallv rc");
  for (int from = 0; from < size; ++from) {
    for (int i = 0; i < rc[from]; ++i)
      check(recv[rd[from] + i] == value(from, rank, i), "signatureless zero-count: from " + std::to_string(from));
    check(recv[rd[from] + rc[from]] == -1, "signatureless zero-count: gap after " + std::to_string(from));
  }
}

// Byte `b` of element `i` of the MPI_REAL16 block `from` sends `to`.
char real16Byte(int from, int to, int i, int b) { return static_cast<char>(value(from, to, i) * 31 + b); }

// Case 2: ranks 0 and 1 exchange 2 MPI_REAL16 with each other (both sides
// of that type); the others use MPI_INT and exchange nothing with them.
void someRanksExchange(MPI_Comm comm, int rank, int size) {
  const bool real = rank < 2;
  const int unit = real ? kReal16 : static_cast<int>(sizeof(int));
  auto count = [real, rank](int peer) {
    if (real) return peer < 2 && peer != rank ? 2 : 0;
    return peer >= 2 ? 3 : 0;
  };
  std::vector<int> counts(size), displs(size);
  int units = 0;
  for (int peer = 0; peer < size; ++peer) {
    counts[peer] = count(peer);
    displs[peer] = units;
    units += counts[peer] + 1;  // one element of gap
  }
  std::vector<char> send(static_cast<size_t>(units * unit), 0), recv(send.size(), 0x55);
  for (int peer = 0; peer < size; ++peer) {
    for (int i = 0; i < counts[peer]; ++i) {
      char* at = send.data() + static_cast<size_t>((displs[peer] + i) * unit);
      if (real) {
        for (int b = 0; b < kReal16; ++b) at[b] = real16Byte(rank, peer, i, b);
      } else {
        const int v = value(rank, peer, i);
        std::memcpy(at, &v, sizeof v);
      }
    }
  }
  const MPI_Datatype type = real ? MPI_REAL16 : MPI_INT;
  check(MPI_Alltoallv(send.data(), counts.data(), displs.data(), type, recv.data(), counts.data(), displs.data(),
                      type, comm) == MPI_SUCCESS,
        "signatureless exchange rc");
  for (int from = 0; from < size; ++from) {
    for (int i = 0; i <= counts[from]; ++i) {  // the element after the block: the gap, untouched
      const char* at = recv.data() + static_cast<size_t>((displs[from] + i) * unit);
      for (int b = 0; b < unit; ++b) {
        char expected = 0x55;
        if (i < counts[from] && real) expected = real16Byte(from, rank, i, b);
        if (i < counts[from] && !real) {
          const int v = value(from, rank, i);
          std::memcpy(&expected, reinterpret_cast<const char*>(&v) + b, 1);
        }
        check(at[b] == expected, "signatureless exchange: from " + std::to_string(from) + " element " +
                                     std::to_string(i) + " byte " + std::to_string(b));
      }
    }
  }
}

// Case 3: MPI_Alltoall of zero elements, rank 0's types MPI_REAL16.
void zeroCountAlltoall(MPI_Comm comm, int rank) {
  int send = 7, recv = -1;
  const MPI_Datatype type = rank == 0 ? MPI_REAL16 : MPI_INT;
  check(MPI_Alltoall(&send, 0, type, &recv, 0, type, comm) == MPI_SUCCESS, "signatureless zero alltoall rc");
  check(recv == -1, "signatureless zero alltoall wrote into the buffer");
}

}  // namespace

void signaturelessTypes(MPI_Comm world) {
  int rank, size;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  MPI_Comm comm;
  MPI_Comm_dup(world, &comm);
  for (int i = 0; i < 2; ++i) {  // twice on one communicator: nothing left behind
    zeroCountSide(comm, rank, size);
    someRanksExchange(comm, rank, size);
    zeroCountAlltoall(comm, rank);
  }
  MPI_Comm_free(&comm);
}

}  // namespace interpose_test
