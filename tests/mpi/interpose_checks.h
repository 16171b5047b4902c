// tests/mpi/interpose_checks.h — what the interposition test program's
// parts share: the failure count, the check, and the value every sent int
// carries.
#pragma once

#include <mpi.h>
#if defined(OPEN_MPI)
#include <mpi-ext.h>  // MPIX_Alltoall_init, MPIX_Alltoallv_init
#endif

#include <cstdio>
#include <string>

// The persistent collectives' inits: MPI 4's MPI_Alltoall_init, named
// MPIX_Alltoall_init in Open MPI 4.1.
#if defined(OPEN_MPI)
#define PERSISTENT_INIT(collective) MPIX_##collective##_init
#else
#define PERSISTENT_INIT(collective) MPI_##collective##_init
#endif

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

// tests/mpi/interpose_direct_write.cc: blocking calls on direct-write
// blocks, buffers and layouts changing on some ranks only.
void directWriteAlltoall(MPI_Comm comm);
// tests/mpi/interpose_requests.cc: the non-blocking and persistent forms.
// `testanyLoop`: the third run completes through an MPI_Testany loop (else
// MPI_Waitall). MPICH 4.0's own persistent alltoall, not preloaded, leaves
// the in-place buffer wrong or never completes under that loop (reproduced
// with MPICH alone), so its native run waits instead.
void persistentAlltoall(MPI_Comm comm, bool testanyLoop);
void persistentAlltoallv(MPI_Comm comm);
void ialltoall(MPI_Comm comm, int how);
void ialltoallBesidePeerSend(MPI_Comm comm);
void requestGetStatus(MPI_Comm comm);
// tests/mpi/interpose_mixed_types.cc: non-blocking and persistent alltoalls
// whose types ibdt takes directly on some ranks only; `bridged`: the
// library is loaded (a case the MPI library's own call fails).
void mixedTypes(MPI_Comm comm, bool bridged);
// tests/mpi/interpose_alltoallv_reuse.cc: MPI_Alltoallv (blocking, or
// `nonblocking`: MPI_Ialltoallv + MPI_Wait) with repeated arguments, arguments changed on some ranks only, and (bridge
// only: MPI's own behaviour differs) counts that do not match.
void alltoallvReuse(MPI_Comm comm, bool nonblocking);
void alltoallvMismatch(MPI_Comm world);
// tests/mpi/interpose_alltoallv_inplace.cc: the same for MPI_IN_PLACE.
void alltoallvInPlaceReuse(MPI_Comm comm);
void alltoallvInPlaceMismatch(MPI_Comm world);
// Derived element types with holes, every byte checked. `withStruct`: also
// a struct {int, double} resized to 24 bytes (MPICH 4.0's own in-place
// MPI_Alltoallv fails it with "Message truncated" in its
// sendrecv_replace, reproduced with MPICH alone, so its native runs skip it).
void alltoallvInPlaceDerived(MPI_Comm comm, bool withStruct);
// tests/mpi/interpose_signatureless.cc: a type ibdt has no signature for,
// on some ranks only.
void signaturelessTypes(MPI_Comm world);

}  // namespace interpose_test
