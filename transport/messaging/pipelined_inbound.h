// transport/messaging/pipelined_inbound.h — the pipelined eager message a
// peer is sending us (pipelined_send.h is the other side). Its fragments
// arrive in order, and nothing else that starts a message comes before the
// last, so one per peer is all the state a receiver holds. A fragment goes
// straight into its receive, or, while none is posted, into the unexpected
// copy a receive posted later takes over (adopt).
#pragma once

#include <memory>
#include <span>

#include "transport/messaging/operation.h"

namespace ibdt::messaging {

class PipelinedInbound {
 public:
  bool active() const { return active_; }
  int64_t received() const { return received_; }          // packed bytes arrived
  int64_t bytes() const { return envelope_.bytes; }       // of the whole message
  Unexpected* unexpected() const { return unexpected_; }  // while no receive took it

  // The first fragment, for the posted receive `op`.
  void startMatched(std::shared_ptr<Operation> op, TypeCache& types, int source, const wire::Envelope& envelope,
                    std::span<const uint8_t> payload);
  // The first fragment with no receive: kept in `unexpected` as it arrives.
  // Returns the bytes reserved for the whole message (the core holds them
  // against the unexpected budget).
  size_t startUnexpected(Unexpected& unexpected, const wire::Envelope& envelope, std::span<const uint8_t> payload,
                         int64_t pipelineLimit);
  // A later fragment from `rank`; out of place is that peer's protocol
  // error. `held`: what the unexpected copy grew by.
  Status onFragment(int rank, const wire::Fragment& fragment, std::span<const uint8_t> payload, size_t& held);
  // The receive `op` takes the unexpected message over while it arrives.
  void adopt(std::shared_ptr<Operation> op, TypeCache& types, const Unexpected& unexpected);
  // The peer failed: the receive completes with `failure`. Returns the
  // unexpected part to discard (no receive may take half a message), or null.
  Unexpected* drop(const Status& failure);

 private:
  void begin(const wire::Envelope& envelope, size_t firstBytes);

  bool active_ = false;
  wire::Envelope envelope_{};
  int64_t received_ = 0;
  std::shared_ptr<Operation> op_;     // its receive; null while unexpected
  Unexpected* unexpected_ = nullptr;  // queued until a receive takes it over
  // A receive that failed (signature, unpack) still completes only with the
  // last fragment: like any receive it returns once the message is consumed,
  // so its peer's send can finish.
  Status failure_;
};

}  // namespace ibdt::messaging
