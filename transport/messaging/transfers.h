// transport/messaging/transfers.h — the state of one rendezvous, on each side.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <utility>

#include "transport/messaging/operation.h"
#include "transport/messaging/recv_protocol.h"
#include "transport/messaging/send_protocol.h"
#include "transport/messaging/staging.h"

namespace ibdt::messaging {

// Sender side of one rendezvous.
struct SendTransfer {
  uint32_t id = 0;
  std::shared_ptr<Operation> op;
  bool wantsPack = false;
  bool replied = false;
  wire::Cts cts{};
  std::unique_ptr<SendProtocol> protocol;  // the scheme's data phase, once the reply arrived
  int64_t next = 0;                        // next packed byte to post
  uint64_t posted = 0;
  uint64_t completed = 0;
  uint64_t released = 0;  // ring segments the receiver freed
  bool waitingForFin = false;
  std::deque<std::pair<uint64_t, Staging>> inFlight;  // staging freed after `first` completions
};

// Receiver side of one rendezvous.
struct RecvTransfer {
  uint32_t id = 0;
  std::shared_ptr<Operation> op;
  uint32_t senderTransfer = 0;
  int64_t bytes = 0;  // packed bytes that will arrive
  int64_t messageBytes = 0;
  std::unique_ptr<RecvProtocol> protocol;  // unpack or zero-copy, by the reply
  // P-RRS: the sender offered its packed data; we read it into the zero-copy receive.
  bool reading = false;
  wire::Packed packed{};
  int64_t readNext = 0;
  uint64_t readsPosted = 0;
  uint64_t readsCompleted = 0;
};

}  // namespace ibdt::messaging
