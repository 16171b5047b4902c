// The PMPI interposition: MPI entry points that an MPI program reaches
// through LD_PRELOAD=libibdt_mpi_<mpi>.so (or by linking this library before
// MPI's). Each runs ibdt's implementation when it can and otherwise hands
// the call to MPI's own (PMPI_*), logging why at IBDT_LOG=debug.
//
// Taken: MPI_Alltoall, MPI_Alltoallv, MPI_Ialltoall and MPI_Ialltoallv
// (MPI_IN_PLACE included) on intracommunicators with convertible types; MPI_Pack,
// MPI_Unpack, MPI_Pack_size. MPI_Finalize closes ibdt's state; the MPI_Wait
// and MPI_Test families progress ibdt's non-blocking runs
// (mpi/request_interpose.cc), and the persistent MPI_Alltoall(v)_init
// (MPICH) / MPIX_Alltoall(v)_init (Open MPI) with MPI_Start(all). Everything else is
// MPI's own (docs/mpi.md lists what is missing).
#include <mpi.h>
#if defined(OPEN_MPI)
#include <mpi-ext.h>  // MPIX_Alltoall_init (Open MPI 4.1's persistent collectives)
#endif

#include <atomic>
#include <cstdint>
#include <string>

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
// Contexts at once, which their shared Domain does not allow. The level MPI
// provides is fixed at MPI_Init_thread: asked once.
bool threadMultiple() {
  static const bool multiple = [] {
    int level = MPI_THREAD_SINGLE;
    PMPI_Query_thread(&level);
    return level == MPI_THREAD_MULTIPLE;
  }();
  return multiple;
}

// Why ibdt cannot run this alltoall on `comm` (empty: it can). Every reason
// is the same on every rank of a correct MPI program; so are the types'
// (mpi/alltoall_call.h), so no call needs a collective agreement.
std::string alltoallObstacle(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) return "MPI_COMM_NULL";
  int inter = 0;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) return "invalid communicator";
  if (inter) return "intercommunicator";
  if (threadMultiple()) return "MPI_THREAD_MULTIPLE (ibdt's contexts share one fabric domain, one thread at a time)";
  return "";
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

// The one path of every intercepted collective: runs it on ibdt when it
// can, else hands it to the MPI library's own implementation (`pmpi()`, a
// PMPI_* call) with a debug-level line saying why. `take(state, outcome,
// why)` returns false (with `why`) to hand the call over, or true with
// ibdt's outcome.
template <typename Take, typename Pmpi>
int takeOrHand(const char* call, MPI_Comm comm, std::atomic<uint64_t>& taken, std::atomic<uint64_t>& handed,
               Take&& take, Pmpi&& pmpi) {
  auto toMpi = [&](const std::string& why) {
    IBDT_LOG(kDebug, "mpi: ", call, " handed to MPI: ", why);
    handed.fetch_add(1, std::memory_order_relaxed);
    return pmpi();
  };
  if (!bridgeEnabled()) return toMpi("IBDT_MPI=off");
  // The communicator of the previous call, if ibdt runs on it: its
  // obstacles were checked when its state was set up and cannot change
  // (an attribute lookup and MPI_Comm_test_inter cost as much as a small
  // alltoall's own work).
  CommState* state = recentCommState(comm);
  if (state == nullptr) {
    if (std::string why = alltoallObstacle(comm); !why.empty()) return toMpi(why);
    auto found = commState(comm);
    if (!found.isOk()) return toMpi(found.status().toString());
    state = *found;
  }
  Status outcome;
  std::string why;
  if (!take(*state, outcome, why)) return toMpi(why);
  taken.fetch_add(1, std::memory_order_relaxed);
  return ibdtOutcome(outcome, call, comm);
}

}  // namespace
}  // namespace ibdt::mpi

using namespace ibdt;
using namespace ibdt::mpi;

extern "C" int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                            int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  const AlltoallArgs args{sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype};
  return takeOrHand(
      "MPI_Alltoall", comm, counters().alltoallIbdt, counters().alltoallMpi,
      [&](CommState& state, Status& done, std::string& why) { return runOnIbdt(state, args, comm, done, why); },
      [&] { return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm); });
}

extern "C" int MPI_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                             void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                             MPI_Comm comm) {
  const AlltoallvArgs args{sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype};
  return takeOrHand(
      "MPI_Alltoallv", comm, counters().alltoallvIbdt, counters().alltoallvMpi,
      [&](CommState& state, Status& done, std::string& why) {
        return runAlltoallvOnIbdt(state, args, comm, done, why);
      },
      [&] {
        return PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm);
      });
}

extern "C" int MPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                             int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  const AlltoallArgs args{sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype};
  return takeOrHand(
      "MPI_Ialltoall", comm, counters().ialltoallIbdt, counters().ialltoallMpi,
      [&](CommState& state, Status& started, std::string& why) {
        return startIalltoall(state, args, comm, request, started, why);
      },
      [&] { return PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request); });
}

extern "C" int MPI_Ialltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                              MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
                              MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  const AlltoallvArgs args{sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype};
  return takeOrHand(
      "MPI_Ialltoallv", comm, counters().ialltoallIbdt, counters().ialltoallMpi,
      [&](CommState& state, Status& started, std::string& why) {
        return startIalltoallv(state, args, comm, request, started, why);
      },
      [&] {
        return PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm,
                               request);
      });
}

namespace {

// The persistent inits (MPICH 4.0's MPI_*_init, Open MPI 4.1's MPIX_*_init).
template <typename Pmpi>
int persistentAlltoall(const AlltoallArgs& args, MPI_Comm comm, MPI_Info info, MPI_Request* request, Pmpi pmpi) {
  return takeOrHand(
      "MPI_Alltoall_init", comm, counters().ialltoallIbdt, counters().ialltoallMpi,
      [&](CommState& state, Status& built, std::string& why) {
        return initPersistentAlltoall(state, args, comm, info, request, built, why);
      },
      [&] {
        return pmpi(args.sendbuf, args.sendcount, args.sendtype, args.recvbuf, args.recvcount, args.recvtype, comm,
                    info, request);
      });
}

template <typename Pmpi>
int persistentAlltoallv(const AlltoallvArgs& args, MPI_Comm comm, MPI_Info info, MPI_Request* request, Pmpi pmpi) {
  return takeOrHand(
      "MPI_Alltoallv_init", comm, counters().ialltoallIbdt, counters().ialltoallMpi,
      [&](CommState& state, Status& built, std::string& why) {
        return initPersistentAlltoallv(state, args, comm, info, request, built, why);
      },
      [&] {
        return pmpi(args.sendbuf, args.sendcounts, args.sdispls, args.sendtype, args.recvbuf, args.recvcounts,
                    args.rdispls, args.recvtype, comm, info, request);
      });
}

}  // namespace

#if defined(OMPI_HAVE_MPI_EXT_PCOLLREQ) && OMPI_HAVE_MPI_EXT_PCOLLREQ
extern "C" int MPIX_Alltoall_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                                  MPI_Request* request) {
  return persistentAlltoall({sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype}, comm, info, request,
                            PMPIX_Alltoall_init);
}

extern "C" int MPIX_Alltoallv_init(const void* sendbuf, const int sendcounts[], const int sdispls[],
                                   MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
                                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistentAlltoallv({sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype}, comm,
                             info, request, PMPIX_Alltoallv_init);
}
#endif
#if defined(MPICH_VERSION) && MPI_VERSION >= 4
extern "C" int MPI_Alltoall_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                                 MPI_Request* request) {
  return persistentAlltoall({sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype}, comm, info, request,
                            PMPI_Alltoall_init);
}

extern "C" int MPI_Alltoallv_init(const void* sendbuf, const int sendcounts[], const int sdispls[],
                                  MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
                                  MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistentAlltoallv({sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype}, comm,
                             info, request, PMPI_Alltoallv_init);
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
