// MPI_Alltoallv calls whose arguments repeat, change on some ranks only,
// or (with the bridge) do not match: the bridge runs a repeated call on its
// cached plan without any agreement, so a rank that reuses its plan must
// still pair up with one that builds a new plan, and a pair changed on one
// side only must fail on the ranks involved, not hang (the launcher's
// timeout bounds the run). Every received int and every gap is checked.
// The reuse runs blocking and as MPI_Ialltoallv + MPI_Wait (whose plans
// are kept per reserved tag: more repeated calls than tags, so plans are
// started again, mpi/tagged_plans.h).
#include <mpi.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "interpose_checks.h"

namespace interpose_test {
namespace {

int salt_ = 0;  // new data in every call

// Ints rank `from` sends rank `to`.
using Counts = std::function<int(int from, int to)>;

int baseInts(int from, int to) { return (from + 2 * to) % 4 * 3 + (from == to ? 1 : 0); }

// Blocks in peer order, one int of gap after each (it must stay -1).
struct Layout {
  std::vector<int> sc, sd, rc, rd;
  int sendInts = 0, recvInts = 0;
};

// `sent` / `expected`: what this rank sends to / expects from each peer.
Layout layoutOf(int rank, int size, const Counts& sent, const Counts& expected) {
  Layout l{std::vector<int>(size), std::vector<int>(size), std::vector<int>(size), std::vector<int>(size)};
  for (int peer = 0; peer < size; ++peer) {
    l.sc[peer] = sent(rank, peer);
    l.sd[peer] = l.sendInts;
    l.sendInts += l.sc[peer] + 1;
    l.rc[peer] = expected(peer, rank);
    l.rd[peer] = l.recvInts;
    l.recvInts += l.rc[peer] + 1;
  }
  return l;
}

struct Buffers {
  std::vector<int> send, recv;
};

// One call with new data (`salt`); checks the blocks from the peers
// `checkFrom` accepts. Returns MPI's return code.
int call(MPI_Comm comm, const Layout& l, Buffers& b, int salt, const std::string& what,
         const std::function<bool(int)>& checkFrom = [](int) { return true; }, bool nonblocking = false) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  b.send.resize(static_cast<size_t>(l.sendInts));
  b.recv.resize(static_cast<size_t>(l.recvInts));
  for (int to = 0; to < size; ++to)
    for (int i = 0; i < l.sc[to]; ++i) b.send[l.sd[to] + i] = value(rank, to, i) + salt;
  std::fill(b.recv.begin(), b.recv.end(), -1);
  int rc = MPI_SUCCESS;
  if (nonblocking) {
    MPI_Request request = MPI_REQUEST_NULL;
    rc = MPI_Ialltoallv(b.send.data(), l.sc.data(), l.sd.data(), MPI_INT, b.recv.data(), l.rc.data(), l.rd.data(),
                        MPI_INT, comm, &request);
    if (rc == MPI_SUCCESS) rc = MPI_Wait(&request, MPI_STATUS_IGNORE);
  } else {
    rc = MPI_Alltoallv(b.send.data(), l.sc.data(), l.sd.data(), MPI_INT, b.recv.data(), l.rc.data(), l.rd.data(),
                       MPI_INT, comm);
  }
  for (int from = 0; from < size; ++from) {
    if (!checkFrom(from)) continue;
    for (int i = 0; i < l.rc[from]; ++i)
      check(b.recv[l.rd[from] + i] == value(from, rank, i) + salt, what + ": from " + std::to_string(from));
    check(b.recv[l.rd[from] + l.rc[from]] == -1, what + ": gap after " + std::to_string(from));
  }
  return rc;
}

// Ranks 0 and 1 exchange `extra` more ints with each other (both sides).
Counts pairChanged(int extra) {
  return [extra](int from, int to) {
    const bool pair = (from == 0 && to == 1) || (from == 1 && to == 0);
    return baseInts(from, to) + (pair ? extra : 0);
  };
}

}  // namespace

void alltoallvReuse(MPI_Comm comm, bool nonblocking) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const Layout base = layoutOf(rank, size, baseInts, baseInts);
  const std::string how = nonblocking ? "MPI_Ialltoallv" : "alltoallv";
  auto run = [&](const Layout& l, Buffers& b, const std::string& what) {
    check(call(comm, l, b, ++salt_, how + ", " + what, [](int) { return true; }, nonblocking) == MPI_SUCCESS,
          how + " rc, " + what);
  };
  Buffers kept;
  const int repeats = nonblocking ? 30 : 5;  // non-blocking: more than the reserved tags, so plans come back
  for (int i = 0; i < repeats; ++i) run(base, kept, "repeated");  // the cached plan, no check after the first run
  for (int i = 0; i < 3; ++i) {  // rank 0 reallocates (a new plan), the others reuse theirs
    Buffers fresh;
    run(base, rank == 0 ? fresh : kept, "rank 0 reallocated");
  }
  // Ranks 0 and 1 change their counts with each other (they check that
  // pair), the others repeat their arguments; twice (then rank 0 and 1 reuse).
  const Layout changed = layoutOf(rank, size, pairChanged(2), pairChanged(2));
  const Layout& mine = rank < 2 ? changed : base;
  for (int i = 0; i < 2; ++i) run(mine, kept, "pair 0-1 changed");
  for (int i = 0; i < repeats; ++i) run(base, kept, "pair 0-1 back");
}

void alltoallvMismatch(MPI_Comm world) {
  int rank, size;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  // One-sided: rank 0 sends 2 more ints to rank 1, which did not change.
  // Both sides: rank 0 sends 2 more, rank 1 expects 1 more.
  for (int bothSides = 0; bothSides < 2; ++bothSides) {
    MPI_Comm comm;  // a fresh communicator per case
    MPI_Comm_dup(world, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    Buffers b;
    const std::string what = bothSides ? "mismatch on both sides" : "mismatch on rank 0 only";
    check(call(comm, layoutOf(rank, size, baseInts, baseInts), b, 1, what + ", first call") == MPI_SUCCESS,
          what + ": first call rc");
    const Counts more = [](int from, int to) { return baseInts(from, to) + (from == 0 && to == 1 ? 2 : 0); };
    const Counts expected = [bothSides](int from, int to) {
      return baseInts(from, to) + (bothSides && from == 0 && to == 1 ? 1 : 0);
    };
    const Layout bad = layoutOf(rank, size, more, expected);
    // Ranks 0 and 1 check only what the others sent them.
    const int rc = call(comm, bad, b, 2, what, [rank](int from) { return rank > 1 || from > 1; });
    if (rank < 2) {
      check(rc != MPI_SUCCESS, what + ": rank " + std::to_string(rank) + " reported no error");
    } else {
      check(rc == MPI_SUCCESS, what + ": a rank outside the pair failed");
    }
    if (!bothSides) {
      // Rank 0 goes back to what rank 1 never left: no check needed (rank
      // 1 would not answer one), every rank succeeds.
      check(call(comm, layoutOf(rank, size, baseInts, baseInts), b, 3, what + ", rank 0 back") == MPI_SUCCESS,
            what + ": rank 0 back: rc");
      // Rank 0's check message of the erroneous call is still queued at
      // rank 1 (it did not check); when both change the pair and check,
      // rank 1 must drop it and take the current one.
      check(call(comm, layoutOf(rank, size, pairChanged(3), pairChanged(3)), b, 4, what + ", pair then changed") ==
                MPI_SUCCESS,
            what + ": pair changed on both ranks afterwards: rc");
    }
    MPI_Comm_free(&comm);
  }
}

}  // namespace interpose_test
