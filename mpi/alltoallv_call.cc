// MPI_Alltoallv on ibdt: a vote, then a plan per call (see the header).
#include "mpi/alltoallv_call.h"

#include <cstdint>
#include <vector>

#include "mpi/comm_state.h"
#include "mpi/type_convert.h"

namespace ibdt::mpi {
namespace {

using datatype::Datatype;

enum Vote : int { kCannot = 0, kNewPlan = 1, kSamePlan = 2 };

AlltoallvCache::Key keyOf(const AlltoallvArgs& args, int p, const Datatype& send, const Datatype& recv) {
  const bool inPlace = args.sendbuf == MPI_IN_PLACE;
  AlltoallvCache::Key key{args.sendbuf, args.recvbuf, send.id(), send.version(), recv.id(), recv.version(),
                          {}, {}, widened(args.recvcounts, p), widened(args.rdispls, p)};
  key.sendcounts = inPlace ? key.recvcounts : widened(args.sendcounts, p);
  key.sdispls = inPlace ? key.rdispls : widened(args.sdispls, p);
  return key;
}

Result<collectives::Plan> buildPlan(CommState& state, const AlltoallvCache::Key& key, const Datatype& send,
                                    const Datatype& recv) {
  const bool inPlace = key.sendbuf == MPI_IN_PLACE;
  return collectives::alltoallvInit(*state.comm, inPlace ? collectives::kInPlace : key.sendbuf, key.sendcounts,
                                    key.sdispls, send, key.recvbuf, key.recvcounts, key.rdispls, recv,
                                    state.alltoallv);
}

}  // namespace

bool denseType(const Datatype& type) { return type.contiguous() && type.lb() == 0 && type.extent() == type.size(); }

std::string alltoallvObstacle(const Result<Datatype>& send, const Result<Datatype>& recv, bool inPlace) {
  if (!send.isOk()) return send.status().toString();
  if (!recv.isOk()) return recv.status().toString();
  if (inPlace && !denseType(*recv)) return "MPI_IN_PLACE with a non-contiguous datatype (ibdt's in-place alltoallv)";
  return "";
}

bool runAlltoallvOnIbdt(CommState& state, const AlltoallvArgs& args, MPI_Comm comm, Status& status,
                        std::string& why) {
  // MPI_IN_PLACE ignores sendcounts, sdispls and sendtype: the outgoing
  // blocks are the incoming ones' (recvcounts, rdispls, recvtype).
  const bool inPlace = args.sendbuf == MPI_IN_PLACE;
  const Result<Datatype> recv = convertType(args.recvtype);
  const Result<Datatype> send = inPlace ? recv : convertType(args.sendtype);
  why = alltoallvObstacle(send, recv, inPlace);
  AlltoallvCache::Key key;
  int vote = kCannot;
  if (why.empty()) {
    key = keyOf(args, state.comm->size(), *send, *recv);
    AlltoallvCache& last = state.lastAlltoallv;
    vote = last.plan.valid() && last.key == key ? kSamePlan : kNewPlan;
  }
  int agreed = kCannot;
  PMPI_Allreduce(&vote, &agreed, 1, MPI_INT, MPI_MIN, comm);
  if (agreed == kCannot) {
    if (why.empty()) why = "another rank cannot take it (a datatype that does not convert there)";
    return false;
  }
  if (agreed == kNewPlan) {
    state.lastAlltoallv = AlltoallvCache{};  // releases the old plan first
    auto plan = buildPlan(state, key, *send, *recv);
    if (!plan.isOk()) {
      status = plan.status();
      return true;
    }
    state.lastAlltoallv = AlltoallvCache{std::move(key), std::move(*plan)};
  }
  status = state.lastAlltoallv.plan.start();
  if (status.isOk()) status = state.lastAlltoallv.plan.wait();
  return true;
}

}  // namespace ibdt::mpi
