// The MPI_Wait and MPI_Test families, wrapped so that ibdt's non-blocking
// runs (mpi/nonblocking.h) progress while the program waits or tests: each
// call first polls every ibdt run in flight once (completing the generalized
// requests of those done), then asks MPI; a blocking wait loops over MPI's
// test form with that poll until MPI's answer is complete, yielding between
// tries (the ranks oversubscribe the cores). With no ibdt run in flight,
// every wrapper is MPI's own call at once.
#include <mpi.h>
#include <sched.h>

#include "mpi/nonblocking.h"

using ibdt::mpi::nonblockingActive;
using ibdt::mpi::progressNonblocking;

extern "C" int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  if (nonblockingActive()) progressNonblocking();
  return PMPI_Test(request, flag, status);
}

extern "C" int MPI_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  if (nonblockingActive()) progressNonblocking();
  return PMPI_Testall(count, requests, flag, statuses);
}

extern "C" int MPI_Testany(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
  if (nonblockingActive()) progressNonblocking();
  return PMPI_Testany(count, requests, index, flag, status);
}

extern "C" int MPI_Testsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                            MPI_Status statuses[]) {
  if (nonblockingActive()) progressNonblocking();
  return PMPI_Testsome(incount, requests, outcount, indices, statuses);
}

extern "C" int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  int flag = 0;
  while (nonblockingActive()) {
    progressNonblocking();
    if (int rc = PMPI_Test(request, &flag, status); rc != MPI_SUCCESS || flag) return rc;
    sched_yield();
  }
  return PMPI_Wait(request, status);
}

extern "C" int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  int flag = 0;
  while (nonblockingActive()) {
    progressNonblocking();
    if (int rc = PMPI_Testall(count, requests, &flag, statuses); rc != MPI_SUCCESS || flag) return rc;
    sched_yield();
  }
  return PMPI_Waitall(count, requests, statuses);
}

extern "C" int MPI_Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
  int flag = 0;
  while (nonblockingActive()) {
    progressNonblocking();
    if (int rc = PMPI_Testany(count, requests, index, &flag, status); rc != MPI_SUCCESS || flag) return rc;
    sched_yield();
  }
  return PMPI_Waitany(count, requests, index, status);
}

extern "C" int MPI_Waitsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                            MPI_Status statuses[]) {
  while (nonblockingActive()) {
    progressNonblocking();
    const int rc = PMPI_Testsome(incount, requests, outcount, indices, statuses);
    if (rc != MPI_SUCCESS || *outcount != 0) return rc;  // some completed, or none active (MPI_UNDEFINED)
    sched_yield();
  }
  return PMPI_Waitsome(incount, requests, outcount, indices, statuses);
}
