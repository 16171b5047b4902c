// The checks and limits a Context's set-up derives (context_limits.h).
#include "transport/messaging/context_limits.h"

#include <unistd.h>

#include <algorithm>
#include <limits>

#include "base/config.h"
#include "base/log.h"
#include "transport/fabric/shared_receives.h"
#include "transport/messaging/credit_flow.h"
#include "transport/messaging/eager_budget.h"

namespace ibdt::messaging {

Status checkSetup(const Bootstrap& bootstrap, const Options& options) {
  int rank = bootstrap.rank;
  int size = bootstrap.size;
  if (size < 1 || rank < 0 || rank >= size || !bootstrap.allgather) {
    return makeError(Code::kInvalidArgument, "messaging context: bad bootstrap (rank ", rank, " of ", size, ")");
  }
  if (options.ringSegments < 2) {
    return makeError(Code::kInvalidArgument, "messaging context: a staging ring needs at least 2 segments, not ",
                     options.ringSegments);
  }
  IBDT_RETURN_IF_ERROR(checkEagerLimit(options.eagerLimit));
  if (options.eagerLimit < 0 || options.eagerCredits < 2 || options.segmentSize < 0) {
    return makeError(Code::kInvalidArgument, "messaging context: eager limit ", options.eagerLimit, ", credits ",
                     options.eagerCredits, " and segment size ", options.segmentSize,
                     " must be >= 0, >= 2 and >= 0 (0: automatic)");
  }
  return Status::ok();
}

uint32_t spinsFor(const Bootstrap& bootstrap, const Options& options) {
  // Spin where every rank of this node can own a core. Oversubscribed, a
  // rank that polls in vain holds the core its peer needs: yield at once,
  // as Open MPI's yield_when_idle does.
  if (options.spins >= 0) return static_cast<uint32_t>(options.spins);
  int local = bootstrap.localSize > 0 ? bootstrap.localSize : bootstrap.size;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return cores > 0 && local <= cores ? 4096 : 0;
}

Result<EagerShape> eagerShapeFor(const Bootstrap& bootstrap, const Options& options) {
  IBDT_ASSIGN_OR_RETURN(uint64_t budget, eagerBudgetFromEnvironment());
  EagerShape shape = eagerShapeWithin(budget, options.eagerLimit, bootstrap.size, options.eagerCredits);
  IBDT_LOG(kDebug, "messaging: rank ", bootstrap.rank, ": ", shape.credits, " eager credits per peer, eager limit ",
           shape.eagerLimit, " (IBDT_MSG_CREDITS ", options.eagerCredits, ", IBDT_MSG_EAGER_LIMIT ",
           options.eagerLimit, ", IBDT_MSG_EAGER_MEMORY ", budget, " over ", bootstrap.size, " ranks)");
  return shape;
}

Result<ProviderLimits> readProviderLimits(const fabric::Caps& caps, uint32_t eagerCredits, size_t slotSize,
                                          int64_t eagerLimit) {
  ProviderLimits limits;
  limits.maxSge = std::max<uint32_t>(1, caps.maxSendSge);
  limits.maxWrBytes = std::numeric_limits<uint32_t>::max();
  if (caps.maxMessageSize != 0) limits.maxWrBytes = std::min<uint64_t>(limits.maxWrBytes, caps.maxMessageSize);
  limits.sendQueueDepth = caps.maxSendQueueDepth != 0 ? std::min<uint32_t>(256, caps.maxSendQueueDepth) : 256;
  limits.recvDepth = eagerCredits + CreditFlow::kReserveSlots;
  if (caps.maxRecvQueueDepth != 0 && limits.recvDepth > caps.maxRecvQueueDepth) {
    return makeError(Code::kInvalidArgument, "IBDT_MSG_CREDITS ", eagerCredits, " + ", CreditFlow::kReserveSlots,
                     " reserved exceeds the provider's receive queue depth ", caps.maxRecvQueueDepth);
  }
  if (slotSize > limits.maxWrBytes) {
    return makeError(Code::kInvalidArgument, "IBDT_MSG_EAGER_LIMIT ", eagerLimit,
                     " exceeds the provider's message size ", caps.maxMessageSize);
  }
  return limits;
}

Status chooseSharedReceives(const fabric::Domain& domain, int ranks, ProviderLimits& limits) {
  limits.sharedReceiveDepth = 0;
  fabric::SharedReceiveSupport support = fabric::sharedReceiveSupport(domain);
  if (!support.available) return Status::ok();
  IBDT_ASSIGN_OR_RETURN(int64_t above, config::getInt("IBDT_MSG_SRQ_RANKS", 0, std::numeric_limits<int32_t>::max()));
  if (!support.always && ranks <= above && above != 0) return Status::ok();
  // Every rank's endpoint (ourselves included) may have recvDepth in flight.
  uint64_t depth = uint64_t{limits.recvDepth} * static_cast<uint64_t>(ranks);
  if (depth > support.maxDepth) {
    if (support.always) {
      return makeError(Code::kInvalidArgument, "IBDT_VERBS_SRQ=1: ", ranks, " ranks x ", limits.recvDepth,
                       " receive buffers exceed the shared receive queue's depth ", support.maxDepth);
    }
    return Status::ok();  // too deep for one shared queue: each endpoint keeps its own
  }
  limits.sharedReceiveDepth = static_cast<uint32_t>(depth);
  return Status::ok();
}

}  // namespace ibdt::messaging
