// Eager protocol and the per-peer control queue, sent within the credits
// CreditFlow grants (credit_flow.h).
//
// A peer has eagerCredits receive buffers for us plus kReserveSlots that
// only credit-only messages use. Every message but those consumes a credit;
// the receiver reports reposted buffers in the next header it sends us, or
// in a credit-only message once half of them are owed. Since a credit-only
// message is sent at most once per eagerCredits/2 credit-consuming arrivals,
// and those need credits from the previous one, at most two are in flight.
#include <algorithm>
#include <cstring>

#include "base/log.h"
#include "transport/messaging/context_impl.h"

namespace ibdt::messaging {

Result<bool> ContextImpl::sendWritten(Peer& peer, uint32_t length, WriteFunction write, void* context,
                                      Status& writeError) {
  if (inPlaceSends_) {
    // Unsignaled: once posted there is nothing to free; a failure still completes.
    fabric::PackedSend send{wrId(WrKind::kInPlace, 0), 0, length, write, context};
    Status status = peer.sendEndpoint->postSendPacked(send);
    if (status.isOk()) return true;
    if (status.code() == Code::kUnsupported) {
      inPlaceSends_ = false;
    } else if (status.code() != Code::kAgain) {
      writeError = std::move(status);
      return false;
    }
  }
  IBDT_ASSIGN_OR_RETURN(uint32_t slot, takeSendSlot());
  uint8_t* data = static_cast<uint8_t*>(sendSlots_->address()) + slot * slotSize();
  Status written = write(context, data);
  if (!written.isOk()) {
    freeSendSlots_.push_back(slot);
    writeError = std::move(written);
    return false;
  }
  fabric::Sge sge{reinterpret_cast<uint64_t>(data), length, sendSlots_->lkey()};
  IBDT_RETURN_IF_ERROR(postSlot(peer, slot, std::span(&sge, 1), "a control message"));
  return true;
}

Status ContextImpl::postSlot(Peer& peer, uint32_t slot, std::span<const fabric::Sge> sges, std::string_view what) {
  uint64_t length = 0;
  for (const fabric::Sge& sge : sges) length += sge.length;
  fabric::SendRequest request;
  request.id = wrId(WrKind::kSlot, slot);
  request.opcode = fabric::Opcode::kSend;
  request.flags = fabric::kSignaled;
  if (length <= domain_.caps().maxInline) request.flags |= fabric::kInline;
  request.sgList = sges.data();
  request.numSge = static_cast<uint32_t>(sges.size());
  Status status = peer.sendEndpoint->postSend(request);
  if (!status.isOk()) {
    freeSendSlots_.push_back(slot);
    return status.withContext(strCat("sending ", what, " to rank ", peer.rank));
  }
  ++peer.sendOutstanding;
  return Status::ok();
}

Status ContextImpl::postControl(Peer& peer, PendingControl& message, bool useReserve) {
  // Everything below `write` is what goes out; it runs once, where the bytes
  // land (the peer's receive buffer, or a send slot).
  struct Writer {
    PendingControl& message;
    wire::Envelope envelope;
    uint32_t credits;
  } writer{message, {}, credits_.owedTo(peer.rank)};
  size_t length = message.bytes.size();
  if (message.eager) {
    Operation& op = *message.eager;
    // A failure here is this send's, not the peer's: the send completes with it.
    auto signature = types_.signature(op.type, op.count);
    if (!signature.isOk()) {
      complete(op, signature.status());
      return Status::ok();
    }
    writer.envelope = {rank_, op.tag, op.communicator, 0, op.bytes, signature->hash, signature->elements};
    length = sizeof(wire::Header) + sizeof(wire::Envelope) + static_cast<size_t>(op.bytes);
  }
  WriteFunction write = [](void* context, uint8_t* out) -> Status {
    auto& w = *static_cast<Writer*>(context);
    if (!w.message.eager) {
      std::copy(w.message.bytes.begin(), w.message.bytes.end(), out);
      wire::Header header;  // return what we owe with whatever goes out
      std::memcpy(&header, out, sizeof(header));
      header.credits = w.credits;
      wire::write(out, 0, header);
      return Status::ok();
    }
    Operation& op = *w.message.eager;
    size_t at = wire::write(out, 0, wire::Header{wire::Kind::kEager, {}, w.credits});
    at = wire::write(out, at, w.envelope);
    // The one copy of the eager path: user buffer -> the peer's (shm) or our
    // registered eager buffer.
    return op.bytes > 0 ? op.segment->pack(op.sendBuffer, 0, op.bytes, out + at) : Status::ok();
  };
  Status packError;
  IBDT_ASSIGN_OR_RETURN(bool sent, sendWritten(peer, static_cast<uint32_t>(length), write, &writer, packError));
  if (!sent) {
    if (message.eager) complete(*message.eager, std::move(packError));
    return Status::ok();
  }
  credits_.sent(peer.rank, /*spendsCredit=*/!useReserve);
  // The eager send is complete: its buffer has been copied.
  if (message.eager) complete(*message.eager, Status::ok());
  return Status::ok();
}

Status ContextImpl::flushControl(Peer& peer) {
  if (!connections_.ready(peer.rank)) return Status::ok();  // queued until the connection is up
  while (!peer.controlQueue.empty() && credits_.available(peer.rank) > 0 && !freeSendSlots_.empty() &&
         peer.sendOutstanding < sendQueueDepth_) {
    PendingControl& front = peer.controlQueue.front();
    if (front.pipelined) {  // one fragment per round, the message stays in front until its last
      IBDT_RETURN_IF_ERROR(postFragment(peer, front));
      if (front.eager->fragmentsPosted || front.eager->done) peer.controlQueue.pop_front();
      continue;
    }
    PendingControl message = std::move(front);
    peer.controlQueue.pop_front();
    IBDT_RETURN_IF_ERROR(postControl(peer, message, /*useReserve=*/false));
  }
  return Status::ok();
}

Status ContextImpl::sendCreditIfOwed(Peer& peer) {
  if (!credits_.due(peer.rank)) return Status::ok();
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
    deliverEager(*op, peer.rank, envelope, payload, Scheme::kEager);
    return;
  }
  // Unexpected: keep a copy, the receive buffer goes back to the peer.
  (*unexpected)->kind = wire::Kind::kEager;
  (*unexpected)->payload.assign(payload.begin(), payload.end());
  holdUnexpected(**unexpected, payload.size());
}

void ContextImpl::deliverEager(Operation& op, int source, const wire::Envelope& envelope,
                               std::span<const uint8_t> payload, Scheme scheme) {
  Status status = beginEager(op, source, envelope, scheme);
  if (status.isOk()) status = unpackEager(op, 0, payload);
  finishEager(op, envelope, std::move(status));
}

Status ContextImpl::beginEager(Operation& op, int source, const wire::Envelope& envelope, Scheme scheme) {
  op.peer = source;
  op.info = RecvInfo{source, envelope.tag, 0, envelope.bytes, scheme};
  if (envelope.bytes == op.bytes) {
    auto mine = types_.signature(op.type, op.count);
    if (!mine.isOk() || mine->hash != envelope.signatureHash || mine->elements != envelope.signatureElements) {
      return makeError(Code::kInvalidArgument, "message from rank ", source, " tag ", envelope.tag,
                       ": the sender's type signature does not match the receive type");
    }
  }
  return Status::ok();
}

Status ContextImpl::unpackEager(Operation& op, int64_t offset, std::span<const uint8_t> payload) {
  // The one copy of the eager path: eager receive buffer -> user buffer,
  // only the bytes that fit the receive (nothing beyond it is written).
  int64_t end = std::min(op.bytes, offset + static_cast<int64_t>(payload.size()));
  return end > offset ? op.segment->unpack(op.recvBuffer, offset, end, payload.data()) : Status::ok();
}

void ContextImpl::finishEager(Operation& op, const wire::Envelope& envelope, Status status) {
  op.info.bytes = status.isOk() ? std::min(envelope.bytes, op.bytes) : 0;
  if (status.isOk() && envelope.bytes > op.bytes) {
    status = makeError(Code::kTruncated, "message from rank ", op.info.source, " tag ", envelope.tag, " has ",
                       envelope.bytes, " bytes, the receive buffer takes ", op.bytes, "; those were delivered");
  }
  complete(op, std::move(status));
}

}  // namespace ibdt::messaging
