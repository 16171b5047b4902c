// IBDT_Pack / IBDT_Unpack / IBDT_Pack_size: MPI_Pack's contract on ibdt's
// packing engine, with MPI's own implementation for what ibdt cannot convert.
#include <climits>

#include "base/log.h"
#include "ibdt_mpi.h"
#include "mpi/counters.h"
#include "mpi/type_convert.h"

namespace ibdt::mpi {
namespace {

// MPI's error class for a bad argument, checked in MPI_Pack's order. A
// null data buffer is allowed: it is MPI_BOTTOM, with absolute addresses in
// the datatype.
int checkArguments(const void* packed, int count, int packedSize, const int* position, MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) return MPI_ERR_COMM;
  if (count < 0) return MPI_ERR_COUNT;
  if (position == nullptr || *position < 0 || packedSize < 0) return MPI_ERR_ARG;
  if (packed == nullptr && packedSize > 0) return MPI_ERR_BUFFER;
  return MPI_SUCCESS;
}

// The segment ibdt packs with, or nothing (then MPI packs; the reason is logged).
Result<const datatype::Segment*> segmentOrLog(MPI_Datatype type, int count, const char* call) {
  auto segment = segmentOf(type, count);
  if (!segment.isOk()) {
    IBDT_LOG(kDebug, "mpi: ", call, " handed to MPI: ", segment.status().toString());
    counters().packMpi.fetch_add(1, std::memory_order_relaxed);
  } else {
    counters().packIbdt.fetch_add(1, std::memory_order_relaxed);
  }
  return segment;
}

}  // namespace
}  // namespace ibdt::mpi

using ibdt::mpi::checkArguments;
using ibdt::mpi::segmentOrLog;

extern "C" int IBDT_Pack(const void* inbuf, int incount, MPI_Datatype datatype, void* outbuf, int outsize,
                         int* position, MPI_Comm comm) {
  if (int error = checkArguments(outbuf, incount, outsize, position, comm); error != MPI_SUCCESS) return error;
  if (datatype == MPI_DATATYPE_NULL) return MPI_ERR_TYPE;
  auto segment = segmentOrLog(datatype, incount, "MPI_Pack");
  if (!segment.isOk()) return PMPI_Pack(inbuf, incount, datatype, outbuf, outsize, position, comm);
  const int64_t bytes = (*segment)->size();
  if (bytes > int64_t{outsize} - *position) return MPI_ERR_TRUNCATE;
  if (bytes == 0) return MPI_SUCCESS;
  if (!(*segment)->pack(inbuf, 0, bytes, static_cast<char*>(outbuf) + *position).isOk()) return MPI_ERR_INTERN;
  *position += static_cast<int>(bytes);
  return MPI_SUCCESS;
}

extern "C" int IBDT_Unpack(const void* inbuf, int insize, int* position, void* outbuf, int outcount,
                           MPI_Datatype datatype, MPI_Comm comm) {
  if (int error = checkArguments(inbuf, outcount, insize, position, comm); error != MPI_SUCCESS) return error;
  if (datatype == MPI_DATATYPE_NULL) return MPI_ERR_TYPE;
  auto segment = segmentOrLog(datatype, outcount, "MPI_Unpack");
  if (!segment.isOk()) return PMPI_Unpack(inbuf, insize, position, outbuf, outcount, datatype, comm);
  const int64_t bytes = (*segment)->size();
  if (bytes > int64_t{insize} - *position) return MPI_ERR_TRUNCATE;
  if (bytes == 0) return MPI_SUCCESS;
  if (!(*segment)->unpack(outbuf, 0, bytes, static_cast<const char*>(inbuf) + *position).isOk()) return MPI_ERR_INTERN;
  *position += static_cast<int>(bytes);
  return MPI_SUCCESS;
}

extern "C" int IBDT_Pack_size(int incount, MPI_Datatype datatype, MPI_Comm comm, int* size) {
  if (comm == MPI_COMM_NULL) return MPI_ERR_COMM;
  if (incount < 0) return MPI_ERR_COUNT;
  if (size == nullptr) return MPI_ERR_ARG;
  if (datatype == MPI_DATATYPE_NULL) return MPI_ERR_TYPE;
  // The packed stream holds exactly incount x size bytes (no header on a
  // homogeneous system), which is what MPI_Pack_size reports too.
  int typeSize = 0;
  if (int error = PMPI_Type_size(datatype, &typeSize); error != MPI_SUCCESS) return error;
  const int64_t bytes = int64_t{incount} * typeSize;
  if (bytes > INT_MAX) return MPI_ERR_ARG;
  *size = static_cast<int>(bytes);
  return MPI_SUCCESS;
}

extern "C" void IBDT_Mpi_get_counters(struct IBDT_Mpi_counters* out) {
  if (out == nullptr) return;
  auto& c = ibdt::mpi::counters();
  out->alltoall_ibdt = c.alltoallIbdt.load();
  out->alltoall_mpi = c.alltoallMpi.load();
  out->pack_ibdt = c.packIbdt.load();
  out->pack_mpi = c.packMpi.load();
  out->alltoallv_ibdt = c.alltoallvIbdt.load();
  out->alltoallv_mpi = c.alltoallvMpi.load();
  out->ialltoall_ibdt = c.ialltoallIbdt.load();
  out->ialltoall_mpi = c.ialltoallMpi.load();
}
