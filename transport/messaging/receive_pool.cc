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

void ReceivePool::enableFreeSlots(size_t slotSize, uint32_t chunkSlots, uint64_t limit) {
  enable(slotSize, chunkSlots);
  limit_ = limit;
}

Status ReceivePool::allocateChunk(fabric::Domain& domain) {
  IBDT_ASSIGN_OR_RETURN(auto region, domain.allocateMemory(chunkSlots_ * slotSize_, fabric::kLocalWrite));
  chunks_.push_back(std::move(region));
  return Status::ok();
}

Status ReceivePool::grow(fabric::Domain& domain, fabric::Endpoint& endpoint) {
  if (poster_ == nullptr) poster_ = &endpoint;
  uint32_t first = slots();
  IBDT_RETURN_IF_ERROR(allocateChunk(domain));
  for (uint32_t slot = first; slot < slots(); ++slot) IBDT_RETURN_IF_ERROR(repost(slot));
  return Status::ok();
}

Result<uint32_t> ReceivePool::take(fabric::Domain& domain) {
  if (free_.empty()) {
    if (slots() >= limit_) return makeError(Code::kResource, "eager pool: all ", limit_, " buffers out");
    uint32_t first = slots();
    IBDT_RETURN_IF_ERROR(allocateChunk(domain));
    // Handed out lowest first, so the pages touched stay few; none beyond the limit.
    for (uint32_t slot = static_cast<uint32_t>(std::min<uint64_t>(slots(), limit_)); slot-- > first;) {
      free_.push_back(slot);
    }
  }
  uint32_t slot = free_.back();
  free_.pop_back();
  return slot;
}

uint8_t* ReceivePool::slotAddress(uint32_t slot) const {
  return static_cast<uint8_t*>(chunks_[slot / chunkSlots_]->address()) + (slot % chunkSlots_) * slotSize_;
}

Status ReceivePool::repost(uint32_t slot) { return post(slot, *poster_); }

Status ReceivePool::post(uint32_t slot, fabric::Endpoint& endpoint) const {
  if (slot >= slots()) return makeError(Code::kInternal, "receive pool: no slot ", slot, " of ", slots());
  const auto* region = chunks_[slot / chunkSlots_].get();
  fabric::Sge sge{reinterpret_cast<uint64_t>(slotAddress(slot)), static_cast<uint32_t>(slotSize_), region->lkey()};
  fabric::RecvRequest request;
  request.id = workId(slot);
  request.sgList = &sge;
  request.numSge = 1;
  return endpoint.postRecv(request);
}

std::span<const uint8_t> ReceivePool::message(uint32_t slot, uint64_t length) const {
  if (slot >= slots()) return {};
  return {slotAddress(slot), std::min<size_t>(length, slotSize_)};
}

}  // namespace ibdt::messaging
