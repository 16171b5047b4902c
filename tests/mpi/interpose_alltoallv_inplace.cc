// Blocking in-place MPI_Alltoallv calls whose arguments repeat, change on
// some ranks only, or (with the bridge) do not match. The bridge runs them
// without any agreement (docs/mpi.md): a repeated call starts its cached
// plan, a rank that moved its buffer builds a new one while the others
// reuse theirs, and every run checks every pair in its first control
// exchange, so a pair changed on one rank only fails on both ranks of the
// pair instead of hanging (the launcher's timeout bounds the run), and
// leaves nothing behind: the next correct call on the same communicator
// succeeds. Every received int and every gap is checked.
#include <mpi.h>

#include <functional>
#include <string>
#include <vector>

#include "interpose_checks.h"

namespace interpose_test {
namespace {

// Ints ranks `a` and `b` exchange (in place, both directions alike).
using Counts = std::function<int(int a, int b)>;

int baseInts(int a, int b) { return (a + b) % 4 * 2 + (a == b ? 1 : 0) + 1; }

// Ranks 0 and 1 exchange `extra` more ints with each other.
Counts pairChanged(int extra) {
  return [extra](int a, int b) { return baseInts(a, b) + ((a == 0 && b == 1) || (a == 1 && b == 0) ? extra : 0); };
}

// Blocks in reverse peer order, one int of gap after each (it must stay -1).
struct Layout {
  std::vector<int> counts, displs;
  int ints = 0;
};

Layout layoutOf(int rank, int size, const Counts& counts) {
  Layout l{std::vector<int>(size), std::vector<int>(size)};
  for (int peer = size - 1; peer >= 0; --peer) {
    l.counts[peer] = counts(rank, peer);
    l.displs[peer] = l.ints;
    l.ints += l.counts[peer] + 1;
  }
  return l;
}

// One in-place call with new data (`salt`); checks the blocks from the
// peers `checkFrom` accepts, given MPI's return code. Returns that code.
int call(MPI_Comm comm, const Layout& l, std::vector<int>& buffer, int salt, const std::string& what,
         const std::function<bool(int from, int rc)>& checkFrom = [](int, int) { return true; }) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  buffer.assign(static_cast<size_t>(l.ints), -1);
  for (int to = 0; to < size; ++to)
    for (int i = 0; i < l.counts[to]; ++i) buffer[l.displs[to] + i] = value(rank, to, i) + salt;
  const int rc = MPI_Alltoallv(MPI_IN_PLACE, nullptr, nullptr, MPI_DATATYPE_NULL, buffer.data(), l.counts.data(),
                               l.displs.data(), MPI_INT, comm);
  for (int from = 0; from < size; ++from) {
    if (!checkFrom(from, rc)) continue;
    for (int i = 0; i < l.counts[from]; ++i)
      check(buffer[l.displs[from] + i] == value(from, rank, i) + salt, what + ": from " + std::to_string(from));
    check(buffer[l.displs[from] + l.counts[from]] == -1, what + ": gap after " + std::to_string(from));
  }
  return rc;
}

}  // namespace

void alltoallvInPlaceReuse(MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const Layout base = layoutOf(rank, size, baseInts);
  std::vector<int> kept;
  kept.reserve(static_cast<size_t>(base.ints) + 16);  // the same buffer whatever the layout below
  int salt = 0;
  for (int i = 0; i < 4; ++i)  // identical arguments: the cached plan
    check(call(comm, base, kept, ++salt, "repeated in-place alltoallv") == MPI_SUCCESS, "in-place rc");
  for (int i = 0; i < 3; ++i) {  // rank 0 moves its buffer (a new plan), the others reuse theirs
    std::vector<int> fresh;
    check(call(comm, base, rank == 0 ? fresh : kept, ++salt, "in-place alltoallv, rank 0 reallocated") ==
              MPI_SUCCESS,
          "in-place rc, rank 0 reallocated");
  }
  // Ranks 0 and 1 change their counts with each other, the others repeat
  // their arguments; twice (then ranks 0 and 1 reuse), then back.
  const Layout changed = layoutOf(rank, size, pairChanged(2));
  for (int i = 0; i < 2; ++i)
    check(call(comm, rank < 2 ? changed : base, kept, ++salt, "in-place alltoallv, pair 0-1 changed") ==
              MPI_SUCCESS,
          "in-place rc, pair 0-1 changed");
  check(call(comm, base, kept, ++salt, "in-place alltoallv, pair 0-1 back") == MPI_SUCCESS, "in-place rc, back");
}

void alltoallvInPlaceMismatch(MPI_Comm world) {
  int rank, size;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  MPI_Comm comm;
  MPI_Comm_dup(world, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  const Layout base = layoutOf(rank, size, baseInts);
  std::vector<int> buffer;
  check(call(comm, base, buffer, 1, "in-place mismatch, first call") == MPI_SUCCESS, "in-place first call rc");
  // Rank 0 alone exchanges 2 more ints with rank 1 (an erroneous program).
  const Layout bad = layoutOf(rank, size, rank == 0 ? pairChanged(2) : baseInts);
  const int rc = call(comm, bad, buffer, 2, "in-place mismatch", 
                      [rank](int from, int code) { return rank > 1 && from > 1 && code == MPI_SUCCESS; });
  if (rank < 2) check(rc != MPI_SUCCESS, "in-place mismatch: rank " + std::to_string(rank) + " reported no error");
  // The other ranks may fail too (a rank of the pair gives up its whole
  // run, and tells its peers so) or finish first; either way none hangs.
  // Nothing was left behind: the next correct call on `comm` succeeds everywhere.
  for (int i = 0; i < 2; ++i)
    check(call(comm, base, buffer, 3 + i, "in-place after the mismatch") == MPI_SUCCESS, "in-place after rc");
  MPI_Comm_free(&comm);
}

}  // namespace interpose_test
