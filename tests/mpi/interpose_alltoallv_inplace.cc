// Blocking in-place MPI_Alltoallv calls whose arguments repeat, change on
// some ranks only, or (with the bridge) do not match. The bridge runs them
// without any agreement (docs/mpi.md): a repeated call starts its cached
// plan, a rank that moved its buffer builds a new one while the others
// reuse theirs, and every run checks every pair in its first control
// exchange, so a pair changed on one rank only fails on both ranks of the
// pair instead of hanging (the launcher's timeout bounds the run), and
// leaves nothing behind: the next correct call on the same communicator
// succeeds. Every received int and every gap is checked. Then derived
// element types with holes, which the bridge passes to ibdt's in-place
// alltoallv unstaged; every byte checked, holes included.
#include <mpi.h>

#include <algorithm>
#include <cstring>
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

// Derived element types with holes (docs/alltoallv.md, "In-place with
// derived types"): the bridge hands them to ibdt's in-place alltoallv
// directly. Element i of a block carries value(from, to, i) in its int (and
// that plus 0.5 in its double); every hole and gap keeps its filler byte.
struct DerivedElement {
  std::string name;
  MPI_Datatype type;
  MPI_Aint extent;
  bool hasDouble;  // {int at 0, double at 8} else {int at 0, int at 8}
};

constexpr unsigned char kFiller = 0xC3;

void writeElement(const DerivedElement& e, unsigned char* at, int v) {
  std::memcpy(at, &v, sizeof v);
  if (e.hasDouble) {
    const double d = v + 0.5;
    std::memcpy(at + 8, &d, sizeof d);
  } else {
    std::memcpy(at + 8, &v, sizeof v);
  }
}

// Bytes of one element that hold data (the rest are holes).
bool dataByte(const DerivedElement& e, MPI_Aint offset) {
  return offset < 4 || (offset >= 8 && offset < (e.hasDouble ? 16 : 12));
}

// Symmetric counts from a seed (MPI's rule for in place): zeros, small
// blocks and one huge pair (ranks 0 and 1).
int derivedCount(int a, int b, unsigned seed) {
  const unsigned lo = static_cast<unsigned>(std::min(a, b)), hi = static_cast<unsigned>(std::max(a, b));
  if (lo == 0 && hi == 1) return 3000;
  const unsigned h = (lo * 2654435761u) ^ (hi * 40503u) ^ (seed * 97u);
  return h % 5 == 0 ? 0 : static_cast<int>(h % 37);
}

void derivedCall(MPI_Comm comm, const DerivedElement& e, unsigned seed) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const Layout l = layoutOf(rank, size, [seed](int a, int b) { return derivedCount(a, b, seed); });
  std::vector<unsigned char> buffer(static_cast<size_t>(l.ints * e.extent), kFiller);
  for (int to = 0; to < size; ++to)
    for (int i = 0; i < l.counts[to]; ++i)
      writeElement(e, &buffer[static_cast<size_t>((l.displs[to] + i) * e.extent)], value(rank, to, i));
  const int rc = MPI_Alltoallv(MPI_IN_PLACE, nullptr, nullptr, MPI_DATATYPE_NULL, buffer.data(), l.counts.data(),
                               l.displs.data(), e.type, comm);
  const std::string what = "in-place alltoallv of " + e.name + " (seed " + std::to_string(seed) + ")";
  check(rc == MPI_SUCCESS, what + ": rc");
  std::vector<unsigned char> expected(buffer.size(), kFiller);
  for (int from = 0; from < size; ++from)
    for (int i = 0; i < l.counts[from]; ++i)
      writeElement(e, &expected[static_cast<size_t>((l.displs[from] + i) * e.extent)], value(from, rank, i));
  for (size_t b = 0; b < buffer.size(); ++b) {
    if (buffer[b] == expected[b]) continue;
    const bool data = dataByte(e, static_cast<MPI_Aint>(b) % e.extent);
    check(false, what + ": byte " + std::to_string(b) + (data ? " (data)" : " (a hole: must keep its filler)"));
    break;
  }
}

}  // namespace

void alltoallvInPlaceDerived(MPI_Comm comm, bool withStruct) {
  MPI_Datatype strided, pair, padded;
  MPI_Type_vector(2, 1, 2, MPI_INT, &strided);  // ints at 0 and 8, extent 12
  MPI_Type_commit(&strided);
  const int lengths[2] = {1, 1};
  const MPI_Aint displs[2] = {0, 8};
  const MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE};
  MPI_Type_create_struct(2, lengths, displs, types, &pair);
  MPI_Type_create_resized(pair, 0, 24, &padded);  // and 8 trailing hole bytes
  MPI_Type_commit(&padded);
  for (const DerivedElement& e : {DerivedElement{"vector", strided, 12, false}, DerivedElement{"struct", padded, 24, true}}) {
    if (e.hasDouble && !withStruct) continue;
    for (unsigned seed = 1; seed <= 3; ++seed) derivedCall(comm, e, seed);
  }
  MPI_Type_free(&padded);
  MPI_Type_free(&pair);
  MPI_Type_free(&strided);
}

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
