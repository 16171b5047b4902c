// Eager protocol and the per-peer control queue with credit flow control.
//
// A peer has eagerCredits receive buffers for us plus kReserveSlots that
// only credit-only messages use. Every message but those consumes a credit;
// the receiver reports reposted buffers in the next header it sends us, or
// in a credit-only message once half of them are owed. Since a credit-only
// message is sent at most once per eagerCredits/2 credit-consuming arrivals,
// and those need credits from the previous one, at most two are in flight.
#include <algorithm>

#include "base/log.h"
#include "transport/messaging/context_impl.h"

namespace ibdt::messaging {

Status ContextImpl::postControl(Peer& peer, PendingControl& message, bool useReserve) {
  IBDT_ASSIGN_OR_RETURN(uint32_t slot, takeSendSlot());
  uint8_t* data = static_cast<uint8_t*>(sendSlots_->address()) + slot * slotSize();
  size_t length = 0;
  if (message.eager) {
    Operation& op = *message.eager;
    wire::Header header{wire::Kind::kEager, {}, 0};
    length = wire::write(data, 0, header);
    // A failure here is this send's, not the peer's: the send completes
    // with it and the buffer goes back.
    auto signature = types_.signature(op.type, op.count);
    Status packed = signature.status();
    if (packed.isOk()) {
      wire::Envelope envelope{rank_, op.tag, op.communicator, 0, op.bytes, signature->hash, signature->elements};
      length = wire::write(data, length, envelope);
      // The one copy of the eager path: user buffer -> registered send buffer.
      if (op.bytes > 0) packed = op.segment->pack(op.sendBuffer, 0, op.bytes, data + length);
    }
    if (!packed.isOk()) {
      freeSendSlots_.push_back(slot);
      complete(op, std::move(packed));
      return Status::ok();
    }
    length += static_cast<size_t>(op.bytes);
  } else {
    std::copy(message.bytes.begin(), message.bytes.end(), data);
    length = message.bytes.size();
  }
  // Return what we owe with whatever goes out.
  wire::Header header;
  std::memcpy(&header, data, sizeof(header));
  header.credits = peer.self ? 0 : peer.owed;
  std::memcpy(data, &header, sizeof(header));
  fabric::Sge sge{reinterpret_cast<uint64_t>(data), static_cast<uint32_t>(length), sendSlots_->lkey()};
  fabric::SendRequest request;
  request.id = wrId(WrKind::kSlot, slot);
  request.opcode = fabric::Opcode::kSend;
  request.flags = fabric::kSignaled;
  if (length <= domain_.caps().maxInline) request.flags |= fabric::kInline;
  request.sgList = &sge;
  request.numSge = 1;
  Status status = peer.sendEndpoint->postSend(request);
  if (!status.isOk()) {
    freeSendSlots_.push_back(slot);
    return status.withContext(strCat("sending a control message to rank ", peer.rank));
  }
  ++peer.sendOutstanding;
  if (!peer.self) peer.owed = 0;
  if (!useReserve) --peer.credits;
  // The eager send is complete: its buffer has been copied.
  if (message.eager) complete(*message.eager, Status::ok());
  return Status::ok();
}

Status ContextImpl::flushControl(Peer& peer) {
  if (!peer.link.ready()) return Status::ok();  // queued until the connection is up
  while (!peer.controlQueue.empty() && peer.credits > 0 && !freeSendSlots_.empty() &&
         peer.sendOutstanding < sendQueueDepth_) {
    PendingControl message = std::move(peer.controlQueue.front());
    peer.controlQueue.pop_front();
    IBDT_RETURN_IF_ERROR(postControl(peer, message, /*useReserve=*/false));
  }
  return Status::ok();
}

Status ContextImpl::sendCreditIfOwed(Peer& peer) {
  if (peer.self || peer.owed < creditBatch()) return Status::ok();
  if (freeSendSlots_.empty() || peer.sendOutstanding >= sendQueueDepth_) return Status::ok();
  PendingControl message;
  message.bytes.resize(sizeof(wire::Header));
  wire::write(message.bytes.data(), 0, wire::Header{wire::Kind::kCredit, {}, 0});
  return postControl(peer, message, /*useReserve=*/true);
}

void ContextImpl::handleEager(Peer& peer, const wire::Envelope& envelope, std::span<const uint8_t> payload) {
  std::shared_ptr<Operation> op;
  auto unexpected = matchOrQueue(peer, envelope, &op);
  if (!unexpected.isOk()) {
    failPeer(peer, unexpected.status());
    return;
  }
  if (op) {
    deliverEager(*op, peer.rank, envelope, payload);
    return;
  }
  // Unexpected: keep a copy, the receive buffer goes back to the peer.
  (*unexpected)->kind = wire::Kind::kEager;
  (*unexpected)->payload.assign(payload.begin(), payload.end());
}

void ContextImpl::deliverEager(Operation& op, int source, const wire::Envelope& envelope,
                               std::span<const uint8_t> payload) {
  op.peer = source;
  op.info = RecvInfo{source, envelope.tag, 0, envelope.bytes, Scheme::kEager};
  if (envelope.bytes == op.bytes) {
    auto mine = types_.signature(op.type, op.count);
    if (!mine.isOk() || mine->hash != envelope.signatureHash || mine->elements != envelope.signatureElements) {
      complete(op, makeError(Code::kInvalidArgument, "message from rank ", source, " tag ", envelope.tag,
                             ": the sender's type signature does not match the receive type"));
      return;
    }
  }
  int64_t bytes = std::min(envelope.bytes, op.bytes);
  // The one copy of the eager path: eager receive buffer -> user buffer.
  Status status = bytes > 0 ? op.segment->unpack(op.recvBuffer, 0, bytes, payload.data()) : Status::ok();
  op.info.bytes = status.isOk() ? bytes : 0;
  if (status.isOk() && envelope.bytes > op.bytes) {
    status = makeError(Code::kTruncated, "message from rank ", source, " tag ", envelope.tag, " has ",
                       envelope.bytes, " bytes, the receive buffer takes ", op.bytes, "; those were delivered");
  }
  complete(op, std::move(status));
}

}  // namespace ibdt::messaging
