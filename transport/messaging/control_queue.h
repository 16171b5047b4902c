// transport/messaging/control_queue.h — what waits to be sent to one peer,
// in order: prebuilt control messages, eager sends and pipelined sends
// (eager_send.h, pipelined_send.h). The core flushes it within the credits
// and send slots it has (ControlSender::flush); a pipelined send stays
// at the head until its last fragment left.
#pragma once

#include <deque>
#include <memory>
#include <variant>

#include "transport/messaging/eager_send.h"
#include "transport/messaging/pipelined_send.h"

namespace ibdt::messaging {

class ControlQueue {
 public:
  using Entry = std::variant<EagerSend, ControlMessage, std::shared_ptr<PipelinedSend>>;

  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }
  void push(Entry entry) { entries_.push_back(std::move(entry)); }
  // Posts the head message (or its next fragment) to `rank`, and drops it
  // once nothing of it is left to post. A Status is the peer's failure.
  Status postFront(EagerServices& services, int rank);
  // The peer failed: every queued send completes with `failure`, the queue
  // empties.
  void fail(const Status& failure);
  // The Context is going: sends let go of the user buffers' registrations.
  void releaseRegistrations();

 private:
  std::deque<Entry> entries_;
};

}  // namespace ibdt::messaging
