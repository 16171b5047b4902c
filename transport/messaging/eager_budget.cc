// Eager credits per peer within a rank's eager memory budget (eager_budget.h).
#include "transport/messaging/eager_budget.h"

#include <algorithm>

#include "base/config.h"
#include "transport/messaging/credit_flow.h"

namespace ibdt::messaging {

uint32_t eagerCreditsWithin(uint64_t budgetBytes, uint64_t slotBytes, int ranks, uint32_t maxCredits) {
  uint32_t ceiling = std::max(kMinEagerCredits, maxCredits);
  if (budgetBytes == 0 || slotBytes == 0 || ranks < 1) return ceiling;
  uint64_t slotsPerPeer = budgetBytes / slotBytes / static_cast<uint64_t>(ranks);
  uint64_t credits = slotsPerPeer > CreditFlow::kReserveSlots ? slotsPerPeer - CreditFlow::kReserveSlots : 0;
  return static_cast<uint32_t>(std::clamp<uint64_t>(credits, kMinEagerCredits, ceiling));
}

namespace {

bool floorExceeds(uint64_t budgetBytes, int64_t eagerLimit, int ranks) {
  const uint64_t floorSlots = (kMinEagerCredits + CreditFlow::kReserveSlots) * static_cast<uint64_t>(ranks);
  return budgetBytes != 0 && floorSlots * eagerSlotBytes(eagerLimit) > budgetBytes;
}

}  // namespace

EagerShape eagerShapeWithin(uint64_t budgetBytes, int64_t eagerLimit, int ranks, uint32_t maxCredits) {
  while (floorExceeds(budgetBytes, eagerLimit, ranks) && eagerLimit / 2 >= kMinBudgetEagerLimit) eagerLimit /= 2;
  return {eagerCreditsWithin(budgetBytes, eagerSlotBytes(eagerLimit), ranks, maxCredits), eagerLimit};
}

EagerPoolShape eagerPoolWithin(uint64_t budgetBytes, uint64_t slotBytes, int ranks, uint32_t maxCredits) {
  EagerPoolShape shape;
  shape.ceiling = std::max(kMinEagerCredits, maxCredits);
  const uint64_t endpoints = static_cast<uint64_t>(std::max(ranks, 1));
  const uint64_t slots = slotBytes == 0 ? 0 : budgetBytes / slotBytes;
  if (endpoints * (shape.ceiling + CreditFlow::kReserveSlots) <= slots) {
    shape.guaranteed = shape.ceiling;
  } else {
    uint64_t half = slots / 2 / endpoints;
    uint64_t credits = half > CreditFlow::kReserveSlots ? half - CreditFlow::kReserveSlots : 0;
    shape.guaranteed = static_cast<uint32_t>(std::clamp<uint64_t>(credits, kMinEagerCredits, shape.ceiling));
  }
  shape.slots = std::max(slots, endpoints * (shape.guaranteed + CreditFlow::kReserveSlots));
  return shape;
}

Result<bool> eagerPoolFromEnvironment() {
  IBDT_ASSIGN_OR_RETURN(int chosen, config::getChoice("IBDT_MSG_EAGER_POOL", {"off", "on"}));
  return chosen == 1;
}

Result<uint64_t> eagerBudgetFromEnvironment() {
  IBDT_ASSIGN_OR_RETURN(uint64_t budget, config::getSize("IBDT_MSG_EAGER_MEMORY"));
  if (budget > (uint64_t{1} << 40)) return makeError(Code::kInvalidArgument, "IBDT_MSG_EAGER_MEMORY above 1T");
  return budget;
}

}  // namespace ibdt::messaging
