// tests/mpi/interpose_checks.h — what the interposition test program's
// parts share: the failure count, the check, and the value every sent int
// carries.
#pragma once

#include <mpi.h>

#include <cstdio>
#include <string>

namespace interpose_test {

inline int failures = 0;
inline int worldRank = 0;

inline void check(bool ok, const std::string& what) {
  if (ok) return;
  ++failures;
  std::fprintf(stderr, "rank %d: FAILED: %s\n", worldRank, what.c_str());
}

// The int that rank `from` sends as element `i` of its block for rank `to`.
inline int value(int from, int to, int i) { return from * 1000003 + to * 7919 + i; }

// tests/mpi/interpose_requests.cc: the non-blocking and persistent forms.
// `testanyLoop`: the third run completes through an MPI_Testany loop (else
// MPI_Waitall). MPICH 4.0's own persistent alltoall, not preloaded, leaves
// the in-place buffer wrong or never completes under that loop (reproduced
// with MPICH alone), so its native run waits instead.
void persistentAlltoall(MPI_Comm comm, bool testanyLoop);
void persistentAlltoallv(MPI_Comm comm);
void ialltoall(MPI_Comm comm, int how);

}  // namespace interpose_test
