// One pool of eager receive buffers under a shared receive queue (receive_pool.h).
#include "transport/messaging/receive_pool.h"

#include <algorithm>

#include "transport/messaging/rendezvous_services.h"

namespace ibdt::messaging {

void ReceivePool::enable(size_t slotSize, uint32_t chunkSlots) {
  slotSize_ = slotSize;
  chunkSlots_ = chunkSlots;
}

uint64_t ReceivePool::workId(uint32_t slot) { return wrId(WrKind::kPoolSlot, slot); }
bool ReceivePool::names(uint64_t workId) { return wrKind(workId) == WrKind::kPoolSlot; }
uint32_t ReceivePool::slotOf(uint64_t workId) { return static_cast<uint32_t>(wrValue(workId)); }

Status ReceivePool::grow(fabric::Domain& domain, fabric::Endpoint& endpoint) {
  if (poster_ == nullptr) poster_ = &endpoint;
  IBDT_ASSIGN_OR_RETURN(auto region, domain.allocateMemory(chunkSlots_ * slotSize_, fabric::kLocalWrite));
  uint32_t first = slots();
  chunks_.push_back(std::move(region));
  for (uint32_t slot = first; slot < slots(); ++slot) IBDT_RETURN_IF_ERROR(repost(slot));
  return Status::ok();
}

uint8_t* ReceivePool::slotAddress(uint32_t slot) const {
  return static_cast<uint8_t*>(chunks_[slot / chunkSlots_]->address()) + (slot % chunkSlots_) * slotSize_;
}

Status ReceivePool::repost(uint32_t slot) {
  if (slot >= slots()) return makeError(Code::kInternal, "receive pool: no slot ", slot, " of ", slots());
  const auto* region = chunks_[slot / chunkSlots_].get();
  fabric::Sge sge{reinterpret_cast<uint64_t>(slotAddress(slot)), static_cast<uint32_t>(slotSize_), region->lkey()};
  fabric::RecvRequest request;
  request.id = workId(slot);
  request.sgList = &sge;
  request.numSge = 1;
  return poster_->postRecv(request);
}

std::span<const uint8_t> ReceivePool::message(uint32_t slot, uint64_t length) const {
  if (slot >= slots()) return {};
  return {slotAddress(slot), std::min<size_t>(length, slotSize_)};
}

}  // namespace ibdt::messaging
