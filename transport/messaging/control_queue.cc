// A peer's queue of outgoing messages (control_queue.h).
#include "transport/messaging/control_queue.h"

namespace ibdt::messaging {

Status ControlQueue::postFront(EagerServices& services, int rank) {
  Entry& front = entries_.front();
  bool finished = true;
  if (auto* eager = std::get_if<EagerSend>(&front)) {
    IBDT_RETURN_IF_ERROR(eager->post(services, rank));
  } else if (auto* control = std::get_if<ControlMessage>(&front)) {
    IBDT_RETURN_IF_ERROR(control->post(services, rank, /*useReserve=*/false));
  } else {
    // One fragment per call: the message stays in front until its last.
    IBDT_ASSIGN_OR_RETURN(finished, std::get<std::shared_ptr<PipelinedSend>>(front)->postNext(services, rank));
  }
  if (finished) entries_.pop_front();
  return Status::ok();
}

void ControlQueue::fail(const Status& failure) {
  for (Entry& entry : entries_) {
    if (auto* eager = std::get_if<EagerSend>(&entry)) {
      completeOperation(eager->operation(), failure);
    } else if (auto* pipelined = std::get_if<std::shared_ptr<PipelinedSend>>(&entry)) {
      (*pipelined)->fail(failure);
    }
  }
  entries_.clear();
}

void ControlQueue::releaseRegistrations() {
  for (Entry& entry : entries_) {
    if (auto* pipelined = std::get_if<std::shared_ptr<PipelinedSend>>(&entry)) (*pipelined)->releaseRegistration();
  }
}

}  // namespace ibdt::messaging
