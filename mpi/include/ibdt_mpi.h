/* ibdt_mpi.h — ibdt's packing engine beside MPI (libibdt_mpi_<mpi>.so).
 *
 * IBDT_Pack, IBDT_Unpack and IBDT_Pack_size take MPI_Pack's arguments and
 * return MPI error codes; on a homogeneous system their bytes equal what
 * MPI_Pack produces. The MPI datatype is converted to an ibdt datatype once
 * and cached until it is freed. A type ibdt cannot express (a resized type
 * with a negative extent, a predefined type ibdt has no basic type for) is
 * packed by the MPI library itself (PMPI_Pack), so every call succeeds
 * wherever MPI_Pack would.
 *
 * Preloaded (LD_PRELOAD=libibdt_mpi_<mpi>.so) the same library also
 * replaces MPI_Alltoall and MPI_Pack/MPI_Unpack/MPI_Pack_size through the
 * PMPI profiling interface; IBDT_MPI=off turns that off. See docs/mpi.md.
 */
#ifndef IBDT_MPI_H
#define IBDT_MPI_H

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

int IBDT_Pack(const void* inbuf, int incount, MPI_Datatype datatype, void* outbuf, int outsize, int* position,
              MPI_Comm comm);
int IBDT_Unpack(const void* inbuf, int insize, int* position, void* outbuf, int outcount, MPI_Datatype datatype,
                MPI_Comm comm);
int IBDT_Pack_size(int incount, MPI_Datatype datatype, MPI_Comm comm, int* size);

/* What the interposed entry points did in this process: calls ibdt ran, and
 * calls handed to the MPI library (with the reason logged at IBDT_LOG=debug). */
struct IBDT_Mpi_counters {
  unsigned long long alltoall_ibdt;
  unsigned long long alltoall_mpi;
  unsigned long long pack_ibdt;
  unsigned long long pack_mpi;
  unsigned long long alltoallv_ibdt;
  unsigned long long alltoallv_mpi;
  unsigned long long ialltoall_ibdt; /* MPI_Ialltoall(v) and the persistent alltoall inits */
  unsigned long long ialltoall_mpi;
};
void IBDT_Mpi_get_counters(struct IBDT_Mpi_counters* counters);

#ifdef __cplusplus
}
#endif

#endif /* IBDT_MPI_H */
