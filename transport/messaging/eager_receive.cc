// The receive side of eager and pipelined eager (eager_receive.h).
#include "transport/messaging/eager_receive.h"

#include <algorithm>

namespace ibdt::messaging {

Status beginEager(Operation& op, TypeCache& types, int source, const wire::Envelope& envelope, Scheme scheme) {
  op.peer = source;
  op.info = RecvInfo{source, envelope.tag, 0, envelope.bytes, scheme};
  if (envelope.bytes == op.bytes) {
    if (!op.signature) {  // an operation not made by irecv
      if (auto mine = types.signature(op.type, op.count); mine.isOk()) op.signature = *mine;
    }
    const auto& mine = op.signature;
    if (!mine || mine->hash != envelope.signatureHash || mine->elements != envelope.signatureElements) {
      return makeError(Code::kInvalidArgument, "message from rank ", source, " tag ", envelope.tag,
                       ": the sender's type signature does not match the receive type");
    }
  }
  return Status::ok();
}

Status unpackEager(Operation& op, int64_t offset, std::span<const uint8_t> payload) {
  // The one copy of the eager path: eager receive buffer -> user buffer,
  // only the bytes that fit the receive (nothing beyond it is written).
  int64_t end = std::min(op.bytes, offset + static_cast<int64_t>(payload.size()));
  return end > offset ? op.segment->unpack(op.recvBuffer, offset, end, payload.data()) : Status::ok();
}

void finishEager(Operation& op, const wire::Envelope& envelope, Status status) {
  op.info.bytes = status.isOk() ? std::min(envelope.bytes, op.bytes) : 0;
  if (status.isOk() && envelope.bytes > op.bytes) {
    status = makeError(Code::kTruncated, "message from rank ", op.info.source, " tag ", envelope.tag, " has ",
                       envelope.bytes, " bytes, the receive buffer takes ", op.bytes, "; those were delivered");
  }
  completeOperation(op, std::move(status));
}

void deliverEager(Operation& op, TypeCache& types, int source, const wire::Envelope& envelope,
                  std::span<const uint8_t> payload, Scheme scheme) {
  Status status = beginEager(op, types, source, envelope, scheme);
  if (status.isOk()) status = unpackEager(op, 0, payload);
  finishEager(op, envelope, std::move(status));
}

}  // namespace ibdt::messaging
