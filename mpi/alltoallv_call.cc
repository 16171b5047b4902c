// MPI_Alltoallv on ibdt: a vote, then a plan per call (see the header).
#include "mpi/alltoallv_call.h"

#include <cstdint>
#include <vector>

#include "mpi/comm_state.h"
#include "mpi/type_convert.h"

namespace ibdt::mpi {
namespace {

using datatype::Datatype;

// ibdt's in-place alltoallv moves one element as size() contiguous bytes.
bool dense(const Datatype& type) { return type.contiguous() && type.lb() == 0 && type.extent() == type.size(); }

std::vector<int64_t> widened(const int* values, int count) { return std::vector<int64_t>(values, values + count); }

// Why this rank cannot take the call (empty: it can).
std::string obstacle(const Result<Datatype>& send, const Result<Datatype>& recv, bool inPlace) {
  if (!send.isOk()) return send.status().toString();
  if (!recv.isOk()) return recv.status().toString();
  if (inPlace && !dense(*recv)) return "MPI_IN_PLACE with a non-contiguous datatype (ibdt's in-place alltoallv)";
  return "";
}

}  // namespace

bool runAlltoallvOnIbdt(CommState& state, const AlltoallvArgs& args, MPI_Comm comm, Status& status,
                        std::string& why) {
  // MPI_IN_PLACE ignores sendcounts, sdispls and sendtype: the outgoing
  // blocks are the incoming ones' (recvcounts, rdispls, recvtype).
  const bool inPlace = args.sendbuf == MPI_IN_PLACE;
  const Result<Datatype> recv = convertType(args.recvtype);
  const Result<Datatype> send = inPlace ? recv : convertType(args.sendtype);
  why = obstacle(send, recv, inPlace);
  const int mine = why.empty() ? 1 : 0;
  int all = 0;
  PMPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm);
  if (all == 0) {
    if (why.empty()) why = "another rank cannot take it (a datatype that does not convert there)";
    return false;
  }
  const int p = state.comm->size();
  const std::vector<int64_t> recvcounts = widened(args.recvcounts, p), rdispls = widened(args.rdispls, p);
  const std::vector<int64_t> sendcounts = inPlace ? recvcounts : widened(args.sendcounts, p);
  const std::vector<int64_t> sdispls = inPlace ? rdispls : widened(args.sdispls, p);
  auto plan = collectives::alltoallvInit(*state.comm, inPlace ? collectives::kInPlace : args.sendbuf, sendcounts,
                                         sdispls, *send, args.recvbuf, recvcounts, rdispls, *recv, state.alltoallv);
  status = plan.status();
  if (status.isOk()) status = plan->start();
  if (status.isOk()) status = plan->wait();
  return true;
}

}  // namespace ibdt::mpi
