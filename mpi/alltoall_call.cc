// MPI_Alltoall on ibdt: cached plans on the pinned bridge tag, no per-call
// agreement (see the header).
#include "mpi/alltoall_call.h"

#include <algorithm>
#include <climits>
#include <vector>

#include "collectives/alltoall_rounds.h"
#include "mpi/comm_state.h"
#include "mpi/type_convert.h"

namespace ibdt::mpi {
namespace {

using datatype::Datatype;

constexpr int32_t kBlockingAlltoallTag = collectives::Communicator::kFirstReservedPlanTag;

// Every plan built while this lives takes the bridge tag.
class PinnedTag {
 public:
  explicit PinnedTag(collectives::Communicator& comm) : comm_(comm) { comm_.pinPlanTag(kBlockingAlltoallTag); }
  ~PinnedTag() { comm_.unpinPlanTag(); }
  PinnedTag(const PinnedTag&) = delete;
  PinnedTag& operator=(const PinnedTag&) = delete;

 private:
  collectives::Communicator& comm_;
};

Status runPlan(collectives::Plan& plan) {
  IBDT_RETURN_IF_ERROR(plan.start());
  return plan.wait();
}

Result<collectives::Plan> buildPinned(CommState& state, const void* sendbuf, int64_t sendcount, const Datatype& send,
                                      void* recvbuf, int64_t recvcount, const Datatype& recv) {
  PinnedTag pinned(*state.comm);
  ++state.alltoallPlans.built;
  return collectives::alltoallInit(*state.comm, sendbuf, sendcount, send, recvbuf, recvcount, recv, state.alltoall);
}

AlltoallCache::Key keyOf(const AlltoallArgs& args, const Datatype& send, const Datatype& recv) {
  return {args.sendbuf, args.sendcount, send.id(), send.version(),
          args.recvbuf, args.recvcount, recv.id(), recv.version()};
}

// Both types converted: the cached plan for these arguments, or a new one.
Status runCached(CommState& state, const AlltoallArgs& args, const Datatype& send, const Datatype& recv) {
  const bool inPlace = args.sendbuf == MPI_IN_PLACE;
  const AlltoallCache::Key key = keyOf(args, send, recv);
  collectives::Plan* plan = state.alltoallPlans.find(key);
  if (plan == nullptr) {
    IBDT_ASSIGN_OR_RETURN(collectives::Plan built,
                          buildPinned(state, inPlace ? collectives::kInPlace : args.sendbuf,
                                      inPlace ? args.recvcount : args.sendcount, send, args.recvbuf, args.recvcount,
                                      recv));
    plan = &state.alltoallPlans.insert(key, std::move(built));
  }
  return runPlan(*plan);
}

// The type a side's blocks travel as: its conversion, or, for a type whose
// layout ibdt cannot express (a negative extent), its dense signature type
// (the side is then staged through PMPI_Pack / PMPI_Unpack). Fails only for
// types without a signature in ibdt (no basic type of that kind and size),
// which fail alike on every rank of a correct program.
Result<Datatype> wireType(const Result<Datatype>& converted, MPI_Datatype type) {
  if (converted.isOk()) return converted;
  IBDT_ASSIGN_OR_RETURN(Datatype signature, signatureType(type));
  return collectives::packedType(signature);
}

// At least one side's layout is not expressible: that side's p blocks go
// through a buffer packed (or unpacked) by MPI, described by its wire type,
// which carries the same signature as the peers' messages in a correct
// program. MPI_IN_PLACE: the blocks leave from recvbuf. Not cached: the
// staging buffers live for the call.
Status runStaged(CommState& state, const AlltoallArgs& args, MPI_Comm comm, bool sendStaged, const Datatype& sendWire,
                 bool recvStaged, const Datatype& recvWire) {
  const bool inPlace = args.sendbuf == MPI_IN_PLACE;
  const int64_t p = state.comm->size();
  const void* sendbuf = inPlace ? args.recvbuf : args.sendbuf;
  const int64_t sendcount = inPlace ? args.recvcount : args.sendcount;
  const MPI_Datatype sendtype = inPlace ? args.recvtype : args.sendtype;
  const int64_t sendTotal = sendWire.size() * sendcount * p, recvTotal = recvWire.size() * args.recvcount * p;
  if (sendTotal > INT_MAX || recvTotal > INT_MAX || sendcount * p > INT_MAX || args.recvcount * p > INT_MAX) {
    return makeError(Code::kUnsupported, "mpi: staging ", std::max(sendTotal, recvTotal),
                     " bytes through PMPI_Pack (int counts)");
  }
  std::vector<std::byte> sendStaging(sendStaged ? static_cast<size_t>(sendTotal) : 0);
  std::vector<std::byte> recvStaging(recvStaged ? static_cast<size_t>(recvTotal) : 0);
  int position = 0;
  if (sendStaged && PMPI_Pack(sendbuf, static_cast<int>(sendcount * p), sendtype, sendStaging.data(),
                              static_cast<int>(sendTotal), &position, comm) != MPI_SUCCESS) {
    return makeError(Code::kInvalidArgument, "mpi: PMPI_Pack of the send blocks failed");
  }
  IBDT_ASSIGN_OR_RETURN(collectives::Plan plan,
                        buildPinned(state, sendStaged ? sendStaging.data() : sendbuf, sendcount, sendWire,
                                    recvStaged ? recvStaging.data() : args.recvbuf, args.recvcount, recvWire));
  IBDT_RETURN_IF_ERROR(runPlan(plan));
  position = 0;
  if (recvStaged && PMPI_Unpack(recvStaging.data(), static_cast<int>(recvTotal), &position, args.recvbuf,
                                static_cast<int>(args.recvcount * p), args.recvtype, comm) != MPI_SUCCESS) {
    return makeError(Code::kInvalidArgument, "mpi: PMPI_Unpack of the received blocks failed");
  }
  return Status::ok();
}

// When building a plan communicates (hierarchical splits the communicator;
// kAuto across nodes agrees on the algorithm), every rank must build
// together: one vote per call, the minimum decides.
enum Vote : int { kCannot = 0, kNewPlan = 1, kSamePlan = 2 };

bool runVoted(CommState& state, const AlltoallArgs& args, MPI_Comm comm, const Result<Datatype>& send,
              const Result<Datatype>& recv, Status& status) {
  const bool inPlace = args.sendbuf == MPI_IN_PLACE;
  int vote = kCannot;
  AlltoallCache::Key key;
  if (send.isOk() && recv.isOk()) {
    key = keyOf(args, *send, *recv);
    vote = state.alltoallPlans.find(key) != nullptr ? kSamePlan : kNewPlan;
  }
  int agreed = kCannot;
  PMPI_Allreduce(&vote, &agreed, 1, MPI_INT, MPI_MIN, comm);
  if (agreed == kCannot) return false;
  if (agreed == kNewPlan) {
    state.alltoallPlans.clear();  // every rank then holds exactly the plans the others hold
    ++state.alltoallPlans.built;
    auto plan = collectives::alltoallInit(*state.comm, inPlace ? collectives::kInPlace : args.sendbuf,
                                          inPlace ? args.recvcount : args.sendcount, *send, args.recvbuf,
                                          args.recvcount, *recv, state.alltoall);
    if (!plan.isOk()) {
      status = plan.status();
      return true;
    }
    state.alltoallPlans.insert(key, std::move(*plan));
  }
  status = runPlan(*state.alltoallPlans.find(key));
  return true;
}

}  // namespace

collectives::Plan* AlltoallCache::find(const Key& key) {
  for (Entry& entry : entries) {
    if (entry.key == key && entry.plan.valid()) {
      entry.lastUse = ++clock;
      return &entry.plan;
    }
  }
  return nullptr;
}

collectives::Plan& AlltoallCache::insert(const Key& key, collectives::Plan plan) {
  if (entries.size() >= kMaxPlans) {
    auto oldest = entries.begin();
    for (auto it = entries.begin(); it != entries.end(); ++it) {
      if (it->lastUse < oldest->lastUse) oldest = it;
    }
    entries.erase(oldest);
  }
  entries.push_back(Entry{key, std::move(plan), ++clock});
  return entries.back().plan;
}

bool runOnIbdt(CommState& state, const AlltoallArgs& args, MPI_Comm comm, Status& status, std::string& why) {
  // MPI_IN_PLACE ignores sendcount and sendtype (often MPI_DATATYPE_NULL):
  // the blocks leave from recvbuf as recvcount x recvtype.
  const bool inPlace = args.sendbuf == MPI_IN_PLACE;
  const Result<Datatype> recv = convertType(args.recvtype);
  const Result<Datatype> send = inPlace ? recv : convertType(args.sendtype);
  why = !send.isOk() ? send.status().toString() : !recv.isOk() ? recv.status().toString() : "";
  if (collectives::alltoallInitIsCollective(*state.comm, state.alltoall)) {
    if (!runVoted(state, args, comm, send, recv, status)) {
      if (why.empty()) why = "a datatype did not convert on another rank";
      return false;
    }
    return true;
  }
  if (send.isOk() && recv.isOk()) {
    status = runCached(state, args, *send, *recv);
    return true;
  }
  const Result<Datatype> sendWire = wireType(send, inPlace ? args.recvtype : args.sendtype);
  const Result<Datatype> recvWire = wireType(recv, args.recvtype);
  if (!sendWire.isOk() || !recvWire.isOk()) return false;
  status = runStaged(state, args, comm, !send.isOk(), *sendWire, !recv.isOk(), *recvWire);
  return true;
}

}  // namespace ibdt::mpi
