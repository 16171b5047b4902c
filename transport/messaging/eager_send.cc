// Eager sends and prebuilt control messages (eager_send.h).
#include "transport/messaging/eager_send.h"

#include <algorithm>
#include <cstring>

namespace ibdt::messaging {

ControlMessage ControlMessage::headerOnly(wire::Kind kind) {
  std::vector<uint8_t> bytes(sizeof(wire::Header));
  wire::write(bytes.data(), 0, wire::Header{kind, 0, {}, 0});
  return ControlMessage(std::move(bytes));
}

Status ControlMessage::post(EagerServices& services, int rank, bool useReserve) {
  wire::Header prebuilt;
  std::memcpy(&prebuilt, bytes_.data(), sizeof(prebuilt));
  struct Writer {
    const std::vector<uint8_t>& bytes;
    wire::Header header;  // return what we owe with whatever goes out
  } writer{bytes_, services.headerTo(rank, prebuilt.kind)};
  EagerServices::WriteFunction write = [](void* context, uint8_t* out) -> Status {
    auto& w = *static_cast<Writer*>(context);
    std::copy(w.bytes.begin(), w.bytes.end(), out);
    wire::write(out, 0, w.header);
    return Status::ok();
  };
  Status unused;
  IBDT_ASSIGN_OR_RETURN(bool sent,
                        services.sendWritten(rank, static_cast<uint32_t>(bytes_.size()), write, &writer, unused));
  if (sent) services.messageSent(rank, /*spendsCredit=*/!useReserve);
  return Status::ok();
}

Status EagerSend::post(EagerServices& services, int rank) {
  Operation& op = *op_;
  // A failure here is this send's, not the peer's: the send completes with it.
  auto signature = services.types().signature(op.type, op.count);
  if (!signature.isOk()) {
    completeOperation(op, signature.status());
    return Status::ok();
  }
  // Everything below `write` is what goes out; it runs once, where the bytes
  // land (the peer's receive buffer, or a send slot).
  struct Writer {
    const Operation& op;
    wire::Header header;
    wire::Envelope envelope;
  } writer{op,
           services.headerTo(rank, wire::Kind::kEager),
           {services.selfRank(), op.tag, op.communicator, 0, op.bytes, signature->hash, signature->elements}};
  EagerServices::WriteFunction write = [](void* context, uint8_t* out) -> Status {
    auto& w = *static_cast<Writer*>(context);
    size_t at = wire::write(out, 0, w.header);
    at = wire::write(out, at, w.envelope);
    // The one copy of the eager path: user buffer -> the peer's (shm) or our
    // registered eager buffer.
    return w.op.bytes > 0 ? w.op.segment->pack(w.op.sendBuffer, 0, w.op.bytes, out + at) : Status::ok();
  };
  size_t length = sizeof(wire::Header) + sizeof(wire::Envelope) + static_cast<size_t>(op.bytes);
  Status packError;
  IBDT_ASSIGN_OR_RETURN(bool sent,
                        services.sendWritten(rank, static_cast<uint32_t>(length), write, &writer, packError));
  if (!sent) {
    completeOperation(op, std::move(packError));
    return Status::ok();
  }
  services.messageSent(rank, /*spendsCredit=*/true);
  completeOperation(op, Status::ok());  // its buffer has been copied
  return Status::ok();
}

}  // namespace ibdt::messaging
