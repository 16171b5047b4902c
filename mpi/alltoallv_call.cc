// MPI_Alltoallv on ibdt: cached plans without a vote (see the header).
#include "mpi/alltoallv_call.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <cstdint>
#include <vector>

#include "collectives/checked_alltoallv.h"
#include "collectives/inplace_elements.h"
#include "mpi/alltoall_call.h"
#include "mpi/alltoallv_mailbox_call.h"
#include "mpi/comm_state.h"
#include "mpi/staging.h"
#include "mpi/type_convert.h"

namespace ibdt::mpi {
namespace {

using datatype::Datatype;

// The pair checks' own tag: the reserved tags below it are the blocking
// calls' and the non-blocking calls' (mpi/nonblocking.h).
constexpr int32_t kAlltoallvCheckTag = collectives::Communicator::kFirstReservedPlanTag + 15;

// A new plan on the blocking calls' tag: not in place the checked
// pairwise plan, in place ibdt's in-place alltoallv (it checks every pair
// in every run, in its first control exchange).
Result<collectives::Plan> buildOnPinnedTag(CommState& state, const StagedAlltoallv& call) {
  PinnedTag pinned(*state.comm);
  if (call.sendbuf == collectives::kInPlace) {
    return collectives::alltoallvInit(*state.comm, collectives::kInPlace, call.sendcounts, call.sdispls,
                                      call.sendtype, call.recvbuf, call.recvcounts, call.rdispls, call.recvtype,
                                      state.alltoallv);
  }
  return checkedAlltoallvPlan(state, call, kAlltoallvCheckTag, state.alltoallvCalls, state.alltoallvPairs);
}

bool runUnvoted(CommState& state, const AlltoallvArgs& args, MPI_Comm comm, Status& status, std::string& why) {
  const int p = state.comm->size();
  const uint64_t typesFreed = convertedTypesFreed();
  AlltoallvCache& last = state.lastAlltoallv;
  if (last.plan.valid() && repeatsAlltoallv(last.key, args, p, typesFreed)) {
    status = runPlan(last.plan);
    return true;
  }
  // In place, a type whose elements interleave or share bytes is staged (see inPlaceDirect).
  Result<StagedAlltoallv> call = stageAlltoallv(args, p, args.sendbuf == MPI_IN_PLACE);
  if (!call.isOk()) {  // no signature in ibdt: alike on every rank of a correct program
    why = call.status().toString();
    return false;
  }
  last = AlltoallvCache{};  // releases the old plan first
  Result<collectives::Plan> plan = buildOnPinnedTag(state, *call);
  if (!plan.isOk()) {
    status = plan.status();
    return true;
  }
  if (call->staged()) {  // not cached: the staging buffers live for the call
    status = call->before(comm);
    if (status.isOk()) status = runPlan(*plan);
    if (status.isOk()) status = call->after(comm);
    return true;
  }
  last = AlltoallvCache{alltoallvKey(args, p, typesFreed), std::move(*plan)};
  status = runPlan(last.plan);
  return true;
}

}  // namespace

AlltoallvCache::Key alltoallvKey(const AlltoallvArgs& args, int p, uint64_t typesFreed) {
  const bool inPlace = args.sendbuf == MPI_IN_PLACE;
  AlltoallvCache::Key key{args.sendbuf, args.recvbuf, args.sendtype, args.recvtype, typesFreed,
                          {}, {}, widened(args.recvcounts, p), widened(args.rdispls, p)};
  key.sendcounts = inPlace ? key.recvcounts : widened(args.sendcounts, p);
  key.sdispls = inPlace ? key.rdispls : widened(args.sdispls, p);
  return key;
}

// Whether `kept` holds the p ints of `values`.
static bool sameValues(const std::vector<int64_t>& kept, const int* values, int p) {
  return kept.size() == static_cast<size_t>(p) && std::equal(kept.begin(), kept.end(), values);
}

// alltoallvKey(args, p, typesFreed) == key, without building the key (four
// vectors of p values: allocations on every call) or converting the types.
bool repeatsAlltoallv(const AlltoallvCache::Key& key, const AlltoallvArgs& args, int p, uint64_t typesFreed) {
  const bool inPlace = args.sendbuf == MPI_IN_PLACE;  // the send side is the receive side's
  return key.sendbuf == args.sendbuf && key.recvbuf == args.recvbuf && key.typesFreed == typesFreed &&
         key.recvtype == args.recvtype && (inPlace || key.sendtype == args.sendtype) &&
         sameValues(key.recvcounts, args.recvcounts, p) && sameValues(key.rdispls, args.rdispls, p) &&
         (inPlace || (sameValues(key.sendcounts, args.sendcounts, p) && sameValues(key.sdispls, args.sdispls, p)));
}

Result<collectives::Plan> checkedAlltoallvPlan(CommState& state, const StagedAlltoallv& call, int32_t checkTag,
                                               int64_t callNumber,
                                               std::shared_ptr<collectives::PairCheckHistory> history) {
  return collectives::checkedAlltoallvInit(*state.comm, checkTag, callNumber, std::move(history), call.sendbuf,
                                           call.sendcounts, call.sdispls, call.sendtype, call.recvbuf,
                                           call.recvcounts, call.rdispls, call.recvtype, state.alltoallv.throttle);
}

bool inPlaceDirect(const Datatype& type) {
  return type.extent() >= type.trueExtent() && collectives::checkInPlaceLayout(type).isOk();
}

bool runAlltoallvOnIbdt(CommState& state, const AlltoallvArgs& args, MPI_Comm comm, Status& status,
                        std::string& why) {
  ++state.alltoallvCalls;  // every call, whatever it runs
  // One node: the mailbox, unless this call's blocks do not fit (alike on every rank).
  if (runThroughMailbox(state, args, comm, status)) return true;
  return runUnvoted(state, args, comm, status, why);
}

}  // namespace ibdt::mpi
