// transport/messaging/eager_services.h — what the eager-family send
// protocols (eager_send.h, pipelined_send.h) may ask of the core: the
// envelope's signature, the credits a message carries and spends, and
// posting one message, written in place or through a send slot, or
// gathered from user blocks behind a header in a send slot.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "ibdt/fabric.h"
#include "transport/messaging/operation.h"
#include "transport/messaging/send_protocol.h"
#include "transport/messaging/wire.h"

namespace ibdt::messaging {

class PipelinedSend;
class ProtocolSelector;

// A send slot taken for one message: registered memory of one eager buffer.
struct SendSlot {
  uint32_t index = 0;
  uint8_t* data = nullptr;
  uint32_t lkey = 0;
};

class EagerServices {
 public:
  // Writes a message's bytes at `out`; runs once, where they land.
  using WriteFunction = Status (*)(void* context, uint8_t* out);

  virtual ~EagerServices() = default;
  virtual int selfRank() const = 0;
  virtual TypeCache& types() = 0;
  virtual const ProtocolSelector& selector() const = 0;
  // The header of a message of `kind` to `rank`: the credits it returns and
  // the pool's flags (credit_flow.h); and noting that one left:
  // `spendsCredit` unless it went to a reserve buffer.
  virtual wire::Header headerTo(int rank, wire::Kind kind) const = 0;
  virtual void messageSent(int rank, bool spendsCredit) = 0;
  // Sends the `length` bytes write(context, out) produces: in place in the
  // peer's receive buffer where the provider allows it, else through a send
  // slot. false: the write failed (its error in `writeError`), nothing left.
  virtual Result<bool> sendWritten(int rank, uint32_t length, WriteFunction write, void* context,
                                   Status& writeError) = 0;
  // A gathered message: a slot for its header (kAgain when none is free),
  // scratch to list its entries in, and the post of SGE 0 (the slot) plus
  // the user blocks. `reader` reads those blocks until the post completes
  // (PipelinedSend::fragmentSent); the slot goes back if the post fails.
  virtual Result<SendSlot> takeSendSlot() = 0;
  virtual void returnSendSlot(uint32_t index) = 0;
  virtual SgeOut gatherScratch() = 0;
  virtual Status postGathered(int rank, const SendSlot& slot, std::span<const fabric::Sge> sges,
                              std::shared_ptr<PipelinedSend> reader) = 0;
  virtual Result<UserRegistration> registerUser(const Operation& op, int64_t bytes, uint32_t access, bool single) = 0;
};

}  // namespace ibdt::messaging
