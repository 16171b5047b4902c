// transport/messaging/eager_send.h — what a peer's control queue
// (control_queue.h) sends in one message: a prebuilt control message
// (RTS, CTS, Fin, Release, Packed, credit-only, close) or an eager send,
// packed where it lands (paper Section 5.1). Both carry the credits owed
// to the peer in their header (credit_flow.h); pipelined_send.h is the
// message that leaves in fragments.
#pragma once

#include <memory>
#include <vector>

#include "transport/messaging/eager_services.h"

namespace ibdt::messaging {

// Prebuilt bytes, the header's credit field filled in as they leave.
class ControlMessage {
 public:
  explicit ControlMessage(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}
  // Just a header of `kind` (credit-only, close).
  static ControlMessage headerOnly(wire::Kind kind);
  // `useReserve`: into one of the peer's reserve buffers (spends no credit).
  Status post(EagerServices& services, int rank, bool useReserve);

 private:
  std::vector<uint8_t> bytes_;
};

// An eager send: the user buffer packed straight into the peer's receive
// buffer (shm) or a registered send slot, complete once it left.
class EagerSend {
 public:
  explicit EagerSend(std::shared_ptr<Operation> op) : op_(std::move(op)) {}
  // Posts the message. A failure of its own (signature, pack) completes the
  // send with it; the Status is the peer's (posting failed).
  Status post(EagerServices& services, int rank);
  Operation& operation() const { return *op_; }

 private:
  std::shared_ptr<Operation> op_;
};

}  // namespace ibdt::messaging
