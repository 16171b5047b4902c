// The blocking MPI_Alltoall on direct-write or shared-memory plans kept per
// block size, with no agreement per call (see the header).
#include "mpi/direct_write_call.h"

#include <algorithm>
#include <utility>

#include "base/log.h"
#include "collectives/alltoall_direct_write.h"
#include "mpi/alltoall_call.h"
#include "mpi/comm_state.h"

namespace ibdt::mpi {
namespace {

using datatype::Datatype;

// One side's placement for this call: on the program's buffer when the plan
// packs its blocks itself (`typed`: shared-memory, a converted type) or its
// type is one dense run of bytes per block (the plan writes and reads the
// blocks in place), else on a staging buffer of its own (packed by ibdt when
// the type converted, by PMPI_Pack when ibdt has no layout for it).
Status placeSide(DirectWriteSide& side, const void* base, int count, MPI_Datatype type, const Result<Datatype>& converted,
                 int p, bool typed) {
  side.stage.reset();
  side.ibdtType.reset();
  side.base = base;
  side.count = count;
  side.type = type;
  if (converted.isOk() && typed) {
    side.ibdtType = *converted;
    return Status::ok();
  }
  if (converted.isOk() && collectives::denseBlocks(*converted)) return Status::ok();
  IBDT_ASSIGN_OR_RETURN(side.stage, stageAlltoallBlocks(base, count, type, p, converted.isOk()));
  return Status::ok();
}

const void* planBuffer(const DirectWriteSide& side) { return side.stage ? side.stage->data() : side.base; }

// Whether a shared-memory plan can pack this rank's blocks with its own
// types: both converted, with one signature (a program whose send and
// receive types differ in signature but not in size, which MPI libraries
// run, keeps the byte plan with its sides staged).
bool packsBothTypes(const Result<Datatype>& send, int sendcount, const Result<Datatype>& recv, int recvcount) {
  if (!send.isOk() || !recv.isOk()) return false;
  auto sent = datatype::signature(*send, sendcount), received = datatype::signature(*recv, recvcount);
  return sent.isOk() && received.isOk() && *sent == *received;
}

// Moves the plan to this call's sides: buffers, and for a shared-memory plan
// the types it packs with (bytes for a dense or staged side: the previous
// call may have left it other types).
Status rebindSides(collectives::Plan& plan, const DirectWriteSide& send, const DirectWriteSide& recv,
                   int64_t blockBytes, bool sharedMemory) {
  const void* sendbuf = planBuffer(send);
  void* recvbuf = const_cast<void*>(planBuffer(recv));
  if (!sharedMemory) return plan.rebind(sendbuf, recvbuf);
  const Datatype byte = Datatype::of<std::byte>();
  return plan.rebind(sendbuf, send.ibdtType ? send.count : blockBytes, send.ibdtType.value_or(byte), recvbuf,
                     recv.ibdtType ? recv.count : blockBytes, recv.ibdtType.value_or(byte));
}

// The first error of a run's steps.
Status firstError(Status a, Status b, Status c) {
  if (!a.isOk()) return a;
  if (!b.isOk()) return b;
  return c;
}

}  // namespace

DirectWritePlan* DirectWritePlans::find(int64_t blockBytes) {
  for (auto& plan : plans_) {
    if (plan->blockBytes == blockBytes) {
      plan->lastUse = ++clock_;
      return plan.get();
    }
  }
  return nullptr;
}

DirectWritePlan& DirectWritePlans::insert(int64_t blockBytes, collectives::Plan plan) {
  if (plans_.size() >= capacity_) {
    auto oldest = std::min_element(plans_.begin(), plans_.end(),
                                   [](const auto& a, const auto& b) { return a->lastUse < b->lastUse; });
    if (oldest->get() == last_.plan) last_ = {};
    plans_.erase(oldest);
  }
  auto kept = std::make_unique<DirectWritePlan>();
  kept->blockBytes = blockBytes;
  kept->plan = std::move(plan);
  kept->lastUse = ++clock_;
  plans_.push_back(std::move(kept));
  return *plans_.back();
}

DirectWritePlan* DirectWritePlans::repeated(const AlltoallArgs& args, uint64_t typesFreed) {
  if (last_.plan == nullptr || last_.typesFreed != typesFreed || !(last_.args == args)) return nullptr;
  last_.plan->lastUse = ++clock_;  // as find() would: every rank ages the plans alike
  return last_.plan;
}

Status rerunDirectWrite(DirectWritePlan& plan, MPI_Comm comm) {
  // Every step runs whatever the one before returned: the peers wait for
  // this rank's ready and write, whatever its staging did.
  Status packed = plan.send.stage ? plan.send.stage->pack(comm) : Status::ok();
  Status ran = runPlan(plan.plan);
  Status unpacked = plan.recv.stage && ran.isOk() ? plan.recv.stage->unpack(comm) : Status::ok();
  return firstError(std::move(packed), std::move(ran), std::move(unpacked));
}

Status runDirectWrite(CommState& state, const AlltoallArgs& args, MPI_Comm comm, int64_t blockBytes,
                      const Result<Datatype>& send, const Result<Datatype>& recv, uint64_t typesFreed) {
  const int p = state.comm->size();
  const bool sharedMemory = state.directWriteChoice.algorithm == collectives::AlltoallAlgorithm::kSharedMemory;
  const bool typed = sharedMemory && packsBothTypes(send, args.sendcount, recv, args.recvcount);
  DirectWriteSide sendSide, recvSide;
  Status placed = placeSide(sendSide, args.sendbuf, args.sendcount, args.sendtype, send, p, typed);
  if (placed.isOk()) placed = placeSide(recvSide, args.recvbuf, args.recvcount, args.recvtype, recv, p, typed);
  // A side this rank cannot place (an invalid type: an erroneous program)
  // still takes part, since the peers run the plan whatever happens here:
  // with scratch blocks, nothing sent being the program's, nothing kept.
  std::vector<std::byte> scratch;
  if (!placed.isOk()) {
    scratch.resize(static_cast<size_t>(2 * p * blockBytes));
    sendSide = {scratch.data()};
    recvSide = {scratch.data() + p * blockBytes};
  }
  DirectWritePlans& plans = state.directWritePlans;
  DirectWritePlan* plan = plans.find(blockBytes);
  const void* sendbuf = planBuffer(sendSide);
  void* recvbuf = const_cast<void*>(planBuffer(recvSide));
  if (plan == nullptr) {
    // Every rank is here together: the first call of this block size.
    collectives::AlltoallOptions options = state.alltoall;
    options.algorithm = state.directWriteChoice.algorithm;  // direct-write or shared-memory
    const Datatype byte = Datatype::of<std::byte>();
    ++plans.built;
    auto built = collectives::alltoallInit(*state.comm, sendbuf, blockBytes, byte, recvbuf, blockBytes, byte, options);
    // Every rank keeps the plan, or none does (a later call would build alone).
    int ok = built.isOk() ? 1 : 0, all = 0;
    PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
    if (!built.isOk()) return Status(built.status()).withContext("mpi: building the per-size alltoall plan");
    if (all == 0) return makeError(Code::kInvalidArgument, "mpi: the per-size alltoall plan failed on another rank");
    plan = &plans.insert(blockBytes, std::move(*built));
    IBDT_LOG(kDebug, "mpi: MPI_Alltoall of ", blockBytes, "-byte blocks: ", plan->plan.algorithm(),
             " plan built by every rank, kept for later calls");
  }
  plan->send = std::move(sendSide);
  plan->recv = std::move(recvSide);
  IBDT_RETURN_IF_ERROR(rebindSides(plan->plan, plan->send, plan->recv, blockBytes, sharedMemory));
  if (!placed.isOk()) {
    plans.forget();  // the next call places its sides again
    (void)rerunDirectWrite(*plan, comm);
    return placed;
  }
  plans.remember(args, typesFreed, *plan);
  return rerunDirectWrite(*plan, comm);
}

}  // namespace ibdt::mpi
