// The eager send buffers (send_slots.h).
#include "transport/messaging/send_slots.h"

namespace ibdt::messaging {

Status SendSlots::allocate(fabric::Domain& domain, uint32_t count, size_t slotSize) {
  slotSize_ = slotSize;
  IBDT_ASSIGN_OR_RETURN(memory_, domain.allocateMemory(count * slotSize, fabric::kLocalWrite));
  for (uint32_t slot = count; slot-- > 0;) free_.push_back(slot);
  owner_.resize(count);
  return Status::ok();
}

Result<SendSlot> SendSlots::take() {
  if (free_.empty()) return makeError(Code::kAgain, "no free eager send buffer");
  uint32_t index = free_.back();
  free_.pop_back();
  return SendSlot{index, static_cast<uint8_t*>(memory_->address()) + index * slotSize_, memory_->lkey()};
}

void SendSlots::completed(uint32_t index, const Status& status) {
  free_.push_back(index);
  if (std::shared_ptr<PipelinedSend> reader = std::move(owner_[index])) reader->fragmentSent(status);
}

void SendSlots::releaseRegistrations() {
  for (auto& reader : owner_) {
    if (reader) reader->releaseRegistration();
  }
}

}  // namespace ibdt::messaging
