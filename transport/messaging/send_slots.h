// transport/messaging/send_slots.h — the registered eager buffers messages
// leave from: one slot per message in flight, back in the free list when
// its send completes. A pipelined fragment gathered from user blocks lends
// its slot to its PipelinedSend, which learns of the completion.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ibdt/fabric.h"
#include "transport/messaging/eager_services.h"
#include "transport/messaging/pipelined_send.h"

namespace ibdt::messaging {

class SendSlots {
 public:
  Status allocate(fabric::Domain& domain, uint32_t count, size_t slotSize);
  bool anyFree() const { return !free_.empty(); }
  Result<SendSlot> take();
  void giveBack(uint32_t index) { free_.push_back(index); }
  // `reader` reads user blocks until the send of slot `index` completes.
  void lend(uint32_t index, std::shared_ptr<PipelinedSend> reader) { owner_[index] = std::move(reader); }
  // The send from slot `index` completed with `status`: the slot is free again.
  void completed(uint32_t index, const Status& status);
  // The Context is going: readers let go of their registrations.
  void releaseRegistrations();

 private:
  std::unique_ptr<fabric::MemoryRegion> memory_;
  size_t slotSize_ = 0;
  std::vector<uint32_t> free_;
  std::vector<std::shared_ptr<PipelinedSend>> owner_;  // pipelined sends gathering from user blocks
};

}  // namespace ibdt::messaging
