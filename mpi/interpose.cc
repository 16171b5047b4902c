// The PMPI interposition: MPI entry points that an MPI program reaches
// through LD_PRELOAD=libibdt_mpi_<mpi>.so (or by linking this library before
// MPI's). Each runs ibdt's implementation when it can and otherwise hands
// the call to MPI's own (PMPI_*), logging why at IBDT_LOG=debug.
//
// Taken: MPI_Alltoall, MPI_Alltoallv, MPI_Ialltoall (MPI_IN_PLACE
// included) and MPI_Ialltoallv (not in place) on intracommunicators with
// convertible types; MPI_Pack,
// MPI_Unpack, MPI_Pack_size. MPI_Finalize closes ibdt's state; the MPI_Wait
// and MPI_Test families progress ibdt's non-blocking runs
// (mpi/request_interpose.cc), and the persistent MPI_Alltoall_init (MPICH) /
// MPIX_Alltoall_init (Open MPI) with MPI_Start(all). Everything else is
// MPI's own (docs/mpi.md lists what is missing).
#include <mpi.h>
#if defined(OPEN_MPI)
#include <mpi-ext.h>  // MPIX_Alltoall_init (Open MPI 4.1's persistent collectives)
#endif

#include "base/config.h"
#include "base/log.h"
#include "ibdt_mpi.h"
#include "mpi/alltoallv_call.h"
#include "mpi/comm_state.h"
#include "mpi/counters.h"
#include "mpi/nonblocking.h"
#include "mpi/persistent.h"

namespace ibdt::mpi {
namespace {

// IBDT_MPI (read once): a bad value is reported and leaves the bridge off.
bool bridgeEnabled() {
  static const bool enabled = [] {
    auto value = config::getBool("IBDT_MPI");
    if (!value.isOk()) {
      IBDT_LOG(kError, "mpi: ", value.status().toString(), "; the MPI bridge stays off");
      return false;
    }
    return *value;
  }();
  return enabled;
}

// Under MPI_THREAD_MULTIPLE two threads could drive two communicators'
// Contexts at once, which their shared Domain does not allow.
bool threadMultiple() {
  int level = MPI_THREAD_SINGLE;
  PMPI_Query_thread(&level);
  return level == MPI_THREAD_MULTIPLE;
}

// Why ibdt cannot run this alltoall here (empty: it can). Every reason is
// the same on every rank of a correct MPI program; so are the types'
// (mpi/alltoall_call.h), so no call needs a collective agreement.
std::string alltoallObstacle(MPI_Comm comm) {
  if (!bridgeEnabled()) return "IBDT_MPI=off";
  if (comm == MPI_COMM_NULL) return "MPI_COMM_NULL";
  int inter = 0;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) return "invalid communicator";
  if (inter) return "intercommunicator";
  if (threadMultiple()) return "MPI_THREAD_MULTIPLE (ibdt's contexts share one fabric domain, one thread at a time)";
  return "";
}

int handToMpi(const std::string& why, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
              int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  IBDT_LOG(kDebug, "mpi: MPI_Alltoall handed to MPI: ", why);
  counters().alltoallMpi.fetch_add(1, std::memory_order_relaxed);
  return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int alltoallvToMpi(const std::string& why, const AlltoallvArgs& a, MPI_Comm comm) {
  IBDT_LOG(kDebug, "mpi: MPI_Alltoallv handed to MPI: ", why);
  counters().alltoallvMpi.fetch_add(1, std::memory_order_relaxed);
  return PMPI_Alltoallv(a.sendbuf, a.sendcounts, a.sdispls, a.sendtype, a.recvbuf, a.recvcounts, a.rdispls,
                        a.recvtype, comm);
}

// ibdt's outcome of a call it took, through the communicator's error handler.
int ibdtOutcome(const Status& done, const char* call, MPI_Comm comm) {
  if (done.isOk()) return MPI_SUCCESS;
  IBDT_LOG(kError, "mpi: ", call, ": ", done.toString());
  const int code = done.code() == Code::kInvalidArgument ? MPI_ERR_TYPE : MPI_ERR_OTHER;
  PMPI_Comm_call_errhandler(comm, code);
  return code;
}

// An error goes through the communicator's error handler, as MPI's own
// calls do (MPI_ERRORS_ARE_FATAL by default).
int raised(int code, MPI_Comm comm) {
  if (code != MPI_SUCCESS && comm != MPI_COMM_NULL) PMPI_Comm_call_errhandler(comm, code);
  return code;
}

}  // namespace
}  // namespace ibdt::mpi

using namespace ibdt;
using namespace ibdt::mpi;

extern "C" int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                            int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  if (std::string why = alltoallObstacle(comm); !why.empty()) {
    return handToMpi(why, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  }
  auto state = commState(comm);
  if (!state.isOk()) {
    return handToMpi(state.status().toString(), sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  }
  Status done;
  std::string why;
  if (!runOnIbdt(**state, {sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype}, comm, done, why)) {
    return handToMpi(why, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  }
  counters().alltoallIbdt.fetch_add(1, std::memory_order_relaxed);
  return ibdtOutcome(done, "MPI_Alltoall", comm);
}

extern "C" int MPI_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                             void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                             MPI_Comm comm) {
  const AlltoallvArgs args{sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype};
  if (std::string why = alltoallObstacle(comm); !why.empty()) return alltoallvToMpi(why, args, comm);
  auto state = commState(comm);
  if (!state.isOk()) return alltoallvToMpi(state.status().toString(), args, comm);
  Status done;
  std::string why;
  if (!runAlltoallvOnIbdt(**state, args, comm, done, why)) return alltoallvToMpi(why, args, comm);
  counters().alltoallvIbdt.fetch_add(1, std::memory_order_relaxed);
  return ibdtOutcome(done, "MPI_Alltoallv", comm);
}

extern "C" int MPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                             int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  auto toMpi = [&](const std::string& why) {
    IBDT_LOG(kDebug, "mpi: MPI_Ialltoall handed to MPI: ", why);
    counters().ialltoallMpi.fetch_add(1, std::memory_order_relaxed);
    return PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
  };
  if (std::string why = alltoallObstacle(comm); !why.empty()) return toMpi(why);
  auto state = commState(comm);
  if (!state.isOk()) return toMpi(state.status().toString());
  Status started;
  std::string why;
  if (!startIalltoall(**state, {sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype}, request, started, why)) {
    return toMpi(why);
  }
  counters().ialltoallIbdt.fetch_add(1, std::memory_order_relaxed);
  return ibdtOutcome(started, "MPI_Ialltoall", comm);
}

extern "C" int MPI_Ialltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                              MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
                              MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  auto toMpi = [&](const std::string& why) {
    IBDT_LOG(kDebug, "mpi: MPI_Ialltoallv handed to MPI: ", why);
    counters().ialltoallMpi.fetch_add(1, std::memory_order_relaxed);
    return PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm,
                           request);
  };
  if (std::string why = alltoallObstacle(comm); !why.empty()) return toMpi(why);
  auto state = commState(comm);
  if (!state.isOk()) return toMpi(state.status().toString());
  Status started;
  std::string why;
  const AlltoallvArgs args{sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype};
  if (!startIalltoallv(**state, args, request, started, why)) return toMpi(why);
  counters().ialltoallIbdt.fetch_add(1, std::memory_order_relaxed);
  return ibdtOutcome(started, "MPI_Ialltoallv", comm);
}

namespace ibdt::mpi {
namespace {

// MPI_Alltoall_init / MPIX_Alltoall_init; `pmpi` is the MPI library's own.
template <typename Pmpi>
int alltoallInit(const AlltoallArgs& args, MPI_Comm comm, MPI_Info info, MPI_Request* request, Pmpi pmpi) {
  auto toMpi = [&](const std::string& why) {
    IBDT_LOG(kDebug, "mpi: persistent MPI_Alltoall_init handed to MPI: ", why);
    counters().ialltoallMpi.fetch_add(1, std::memory_order_relaxed);
    return pmpi(args.sendbuf, args.sendcount, args.sendtype, args.recvbuf, args.recvcount, args.recvtype, comm, info,
                request);
  };
  if (std::string why = alltoallObstacle(comm); !why.empty()) return toMpi(why);
  auto state = commState(comm);
  if (!state.isOk()) return toMpi(state.status().toString());
  Status built;
  std::string why;
  if (!initPersistentAlltoall(**state, args, comm, info, request, built, why)) return toMpi(why);
  counters().ialltoallIbdt.fetch_add(1, std::memory_order_relaxed);
  return ibdtOutcome(built, "MPI_Alltoall_init", comm);
}

}  // namespace
}  // namespace ibdt::mpi

#if defined(OMPI_HAVE_MPI_EXT_PCOLLREQ) && OMPI_HAVE_MPI_EXT_PCOLLREQ
extern "C" int MPIX_Alltoall_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                                  MPI_Request* request) {
  return alltoallInit({sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype}, comm, info, request,
                      PMPIX_Alltoall_init);
}
#endif
#if defined(MPICH_VERSION) && MPI_VERSION >= 4
extern "C" int MPI_Alltoall_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                                 MPI_Request* request) {
  return alltoallInit({sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype}, comm, info, request,
                      PMPI_Alltoall_init);
}
#endif

extern "C" int MPI_Pack(const void* inbuf, int incount, MPI_Datatype datatype, void* outbuf, int outsize,
                        int* position, MPI_Comm comm) {
  if (!bridgeEnabled()) return PMPI_Pack(inbuf, incount, datatype, outbuf, outsize, position, comm);
  return raised(IBDT_Pack(inbuf, incount, datatype, outbuf, outsize, position, comm), comm);
}

extern "C" int MPI_Unpack(const void* inbuf, int insize, int* position, void* outbuf, int outcount,
                          MPI_Datatype datatype, MPI_Comm comm) {
  if (!bridgeEnabled()) return PMPI_Unpack(inbuf, insize, position, outbuf, outcount, datatype, comm);
  return raised(IBDT_Unpack(inbuf, insize, position, outbuf, outcount, datatype, comm), comm);
}

extern "C" int MPI_Pack_size(int incount, MPI_Datatype datatype, MPI_Comm comm, int* size) {
  if (!bridgeEnabled()) return PMPI_Pack_size(incount, datatype, comm, size);
  return raised(IBDT_Pack_size(incount, datatype, comm, size), comm);
}

extern "C" int MPI_Finalize() {
  closeAllCommStates();
  return PMPI_Finalize();
}
