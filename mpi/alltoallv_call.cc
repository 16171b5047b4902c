// MPI_Alltoallv on ibdt: a vote, then a plan per call (see the header).
#include "mpi/alltoallv_call.h"

#include <algorithm>
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

// Whether `kept` holds the p ints of `values`.
bool sameValues(const std::vector<int64_t>& kept, const int* values, int p) {
  return kept.size() == static_cast<size_t>(p) && std::equal(kept.begin(), kept.end(), values);
}

// keyOf(args, p, send, recv) == key, without building the key (four
// vectors of p values: allocations on every call).
bool repeats(const AlltoallvCache::Key& key, const AlltoallvArgs& args, int p, const Datatype& send,
             const Datatype& recv) {
  const bool inPlace = args.sendbuf == MPI_IN_PLACE;  // the send side is the receive side's
  return key.sendbuf == args.sendbuf && key.recvbuf == args.recvbuf && key.sendId == send.id() &&
         key.sendVersion == send.version() && key.recvId == recv.id() && key.recvVersion == recv.version() &&
         sameValues(key.recvcounts, args.recvcounts, p) && sameValues(key.rdispls, args.rdispls, p) &&
         (inPlace || (sameValues(key.sendcounts, args.sendcounts, p) && sameValues(key.sdispls, args.sdispls, p)));
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
  const int p = state.comm->size();
  int vote = kCannot;
  if (why.empty()) {
    const AlltoallvCache& last = state.lastAlltoallv;
    vote = last.plan.valid() && repeats(last.key, args, p, *send, *recv) ? kSamePlan : kNewPlan;
  }
  int agreed = kCannot;
  PMPI_Allreduce(&vote, &agreed, 1, MPI_INT, MPI_MIN, comm);
  if (agreed == kCannot) {
    if (why.empty()) why = "another rank cannot take it (a datatype that does not convert there)";
    return false;
  }
  if (agreed == kNewPlan) {
    state.lastAlltoallv = AlltoallvCache{};  // releases the old plan first
    AlltoallvCache::Key key = keyOf(args, p, *send, *recv);
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
