// Small collectives of a few int64 values per rank (broadcast, allgather,
// allreduce), as plans over any communicator and any p. They serve the
// algorithms' own agreements (a split's colours and keys, a plan's checks
// across ranks), so they favour few rounds over bandwidth:
// - allgather: Bruck's concatenation, ceil(log2 p) rounds. Before round k a
//   rank holds the blocks of ranks rank .. rank + 2^k - 1 (in that order in
//   its scratch buffer); it sends the first min(2^k, p - 2^k) of them to
//   rank - 2^k and appends those of rank + 2^k. The last stage rotates them
//   into rank order.
// - allreduce: the allgather, then every rank reduces the p vectors itself
//   (the same order everywhere, so every rank gets the same sum).
// - broadcast: binomial tree from the root, ceil(log2 p) rounds.
#include <algorithm>
#include <cstring>

#include "collectives/bruck_rounds.h"
#include "collectives/staged_plan.h"
#include "base/checked_math.h"

namespace ibdt::collectives {
namespace {

using datatype::Datatype;

constexpr int64_t kMaxValues = int64_t{1} << 24;

Status checkCount(const Communicator& comm, const char* what, int64_t count, const void* a, const void* b) {
  if (count < 0 || count > kMaxValues) {
    return makeError(Code::kInvalidArgument, what, ": count ", count, " (0 .. ", kMaxValues, " values)");
  }
  if (count > 0 && (a == nullptr || b == nullptr)) {
    return makeError(Code::kInvalidArgument, what, ": null buffer for ", count, " values");
  }
  Checked checked;
  checked.mul(checked.mul(count, comm.size()), 8);
  if (checked.overflow) return makeError(Code::kOverflow, what, ": ", count, " values x ", comm.size(), " ranks");
  return Status::ok();
}

// Bruck's allgather of `count` values into the plan's scratch; stage 0
// copies the input there, stages 1 .. rounds exchange, and the last stage
// (rounds + 1) runs `finish(gathered)` with block i = rank + i's values.
Result<std::unique_ptr<StagedPlan>> bruckAllgather(Communicator& comm, const char* name, const int64_t* send,
                                                   int64_t count, std::function<Status(const int64_t*)> finish) {
  const int size = comm.size(), rank = comm.rank();
  const int32_t tag = comm.takePlanTag();
  auto plan = std::make_unique<StagedPlan>(comm, name, static_cast<size_t>(bruckRounds(size) + 2));
  auto* gathered = reinterpret_cast<int64_t*>(plan->scratch(static_cast<size_t>(size * count) * sizeof(int64_t)));
  const size_t bytes = static_cast<size_t>(count) * sizeof(int64_t);
  plan->setBefore(0, [=] {
    if (bytes > 0) std::memcpy(gathered, send, bytes);
    return Status::ok();
  });
  const Datatype int64 = Datatype::of<int64_t>();
  size_t stage = 1;
  for (int held = 1; held < size; held *= 2, ++stage) {
    const int blocks = std::min(held, size - held);
    IBDT_RETURN_IF_ERROR(plan->addSend(stage, gathered, blocks * count, int64, (rank - held + size) % size, tag));
    IBDT_RETURN_IF_ERROR(plan->addRecv(stage, gathered + held * count, blocks * count, int64, (rank + held) % size, tag));
  }
  plan->setBefore(stage, [gathered, finish = std::move(finish)] { return finish(gathered); });
  return plan;
}

int64_t reduce(ReduceOp op, int64_t a, int64_t b) {
  switch (op) {
    case ReduceOp::kMin: return std::min(a, b);
    case ReduceOp::kMax: return std::max(a, b);
    case ReduceOp::kSum: return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));  // wraps
  }
  return a;
}

Status runBlocking(Result<Plan> plan, Deadline deadline) {
  IBDT_RETURN_IF_ERROR(plan.status());
  IBDT_RETURN_IF_ERROR(plan->start());
  return plan->wait(deadline);
}

}  // namespace

Result<Plan> allgatherInit(Communicator& comm, const int64_t* send, int64_t count, int64_t* recv) {
  IBDT_RETURN_IF_ERROR(checkCount(comm, "allgather", count, send, recv));
  const int size = comm.size(), rank = comm.rank();
  IBDT_ASSIGN_OR_RETURN(auto plan, bruckAllgather(comm, "allgather", send, count, [=](const int64_t* gathered) {
    for (int i = 0; i < size; ++i) {
      std::copy_n(gathered + i * count, count, recv + ((rank + i) % size) * count);
    }
    return Status::ok();
  }));
  return Plan(std::move(plan));
}

Result<Plan> allreduceInit(Communicator& comm, const int64_t* send, int64_t* recv, int64_t count, ReduceOp op) {
  IBDT_RETURN_IF_ERROR(checkCount(comm, "allreduce", count, send, recv));
  if (op != ReduceOp::kMin && op != ReduceOp::kMax && op != ReduceOp::kSum) {
    return makeError(Code::kInvalidArgument, "allreduce: unknown operation ", static_cast<int>(op));
  }
  const int size = comm.size(), rank = comm.rank();
  IBDT_ASSIGN_OR_RETURN(auto plan, bruckAllgather(comm, "allreduce", send, count, [=](const int64_t* gathered) {
    // Rank order (block of rank r at (r - rank) mod p), so every rank adds alike.
    for (int64_t v = 0; v < count; ++v) {
      int64_t result = gathered[((size - rank) % size) * count + v];
      for (int r = 1; r < size; ++r) result = reduce(op, result, gathered[((r - rank + size) % size) * count + v]);
      recv[v] = result;
    }
    return Status::ok();
  }));
  return Plan(std::move(plan));
}

Result<Plan> broadcastInit(Communicator& comm, int64_t* values, int64_t count, int root) {
  IBDT_RETURN_IF_ERROR(checkCount(comm, "broadcast", count, values, values));
  const int size = comm.size();
  if (root < 0 || root >= size) {
    return makeError(Code::kInvalidArgument, "broadcast: root ", root, " is not a rank of ", size);
  }
  const int32_t tag = comm.takePlanTag();
  const int relative = (comm.rank() - root + size) % size;
  auto plan = std::make_unique<StagedPlan>(comm, "broadcast", 2);
  const Datatype int64 = Datatype::of<int64_t>();
  int mask = 1;
  for (; mask < size; mask *= 2) {  // the parent: this rank with its lowest set bit cleared
    if ((relative & mask) != 0) {
      IBDT_RETURN_IF_ERROR(plan->addRecv(0, values, count, int64, (relative - mask + root) % size, tag));
      break;
    }
  }
  for (mask /= 2; mask > 0; mask /= 2) {  // children: this rank plus each lower power of two
    if (relative + mask < size) {
      IBDT_RETURN_IF_ERROR(plan->addSend(1, values, count, int64, (relative + mask + root) % size, tag));
    }
  }
  return Plan(std::move(plan));
}

Status allgather(Communicator& comm, const int64_t* send, int64_t count, int64_t* recv, Deadline deadline) {
  return runBlocking(allgatherInit(comm, send, count, recv), deadline);
}
Status allreduce(Communicator& comm, const int64_t* send, int64_t* recv, int64_t count, ReduceOp op,
                 Deadline deadline) {
  return runBlocking(allreduceInit(comm, send, recv, count, op), deadline);
}
Status broadcast(Communicator& comm, int64_t* values, int64_t count, int root, Deadline deadline) {
  return runBlocking(broadcastInit(comm, values, count, root), deadline);
}

}  // namespace ibdt::collectives
