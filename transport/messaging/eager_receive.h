// transport/messaging/eager_receive.h — the receive side of eager and
// pipelined eager: a message whose bytes arrive in the peer's eager
// buffers, whole or in fragments, and are unpacked straight out of them
// (one copy, paper Section 5.1). The steps are separate so that a
// pipelined message (pipelined_inbound.h) can run them fragment by
// fragment; an eager one runs all three at once (deliverEager).
#pragma once

#include <span>

#include "transport/messaging/operation.h"

namespace ibdt::messaging {

// The receive `op` takes the message `envelope` from `source`: records the
// sender and checks the signature when the sizes match (a longer or
// shorter message is a truncation, reported by finishEager).
Status beginEager(Operation& op, TypeCache& types, int source, const wire::Envelope& envelope, Scheme scheme);
// Unpacks packed bytes [offset, offset + payload.size()) that fit the receive.
Status unpackEager(Operation& op, int64_t offset, std::span<const uint8_t> payload);
// The whole message arrived: completes `op` with `status`, or with a
// truncation when the message was longer than the receive.
void finishEager(Operation& op, const wire::Envelope& envelope, Status status);
// All three, for a message that arrived whole.
void deliverEager(Operation& op, TypeCache& types, int source, const wire::Envelope& envelope,
                  std::span<const uint8_t> payload, Scheme scheme);

}  // namespace ibdt::messaging
