// Each peer's control queue (control_queue.h) out within the credits
// CreditFlow grants (credit_flow.h), and the send slots and posts the
// eager-family protocols use (EagerServices).
//
// A peer has eagerCredits receive buffers for us plus kReserveSlots that
// only credit-only messages use. Every message but those consumes a credit;
// the receiver reports reposted buffers in the next header it sends us, or
// in a credit-only message once half of them are owed. Since a credit-only
// message is sent at most once per eagerCredits/2 credit-consuming arrivals,
// and those need credits from the previous one, at most two are in flight.
#include "transport/messaging/context_impl.h"

namespace ibdt::messaging {

Status ContextImpl::flushControl(Peer& peer) {
  if (!connections_.ready(peer.rank)) return Status::ok();  // queued until the connection is up
  while (!peer.control.empty() && credits_.available(peer.rank) > 0 && !freeSendSlots_.empty() &&
         peer.sendOutstanding < sendQueueDepth_) {
    IBDT_RETURN_IF_ERROR(peer.control.postFront(*this, peer.rank));
  }
  return Status::ok();
}

Status ContextImpl::sendCreditIfOwed(Peer& peer) {
  if (!credits_.due(peer.rank)) return Status::ok();
  if (freeSendSlots_.empty() || peer.sendOutstanding >= sendQueueDepth_) return Status::ok();
  return ControlMessage::headerOnly(wire::Kind::kCredit).post(*this, peer.rank, /*useReserve=*/true);
}

Result<bool> ContextImpl::sendWritten(int rank, uint32_t length, WriteFunction write, void* context,
                                      Status& writeError) {
  Peer& peer = peers_[static_cast<size_t>(rank)];
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
  IBDT_ASSIGN_OR_RETURN(SendSlot slot, takeSendSlot());
  Status written = write(context, slot.data);
  if (!written.isOk()) {
    freeSendSlots_.push_back(slot.index);
    writeError = std::move(written);
    return false;
  }
  fabric::Sge sge{reinterpret_cast<uint64_t>(slot.data), length, slot.lkey};
  IBDT_RETURN_IF_ERROR(postSlot(peer, slot.index, std::span(&sge, 1), "a control message"));
  return true;
}

Result<SendSlot> ContextImpl::takeSendSlot() {
  if (freeSendSlots_.empty()) return makeError(Code::kAgain, "no free eager send buffer");
  uint32_t index = freeSendSlots_.back();
  freeSendSlots_.pop_back();
  return SendSlot{index, static_cast<uint8_t*>(sendSlots_->address()) + index * slotSize(), sendSlots_->lkey()};
}

SgeOut ContextImpl::gatherScratch() {
  scratch_.iovecs.resize(maxSge_);
  return SgeOut{scratch_.sges, scratch_.iovecs};
}

Status ContextImpl::postGathered(int rank, const SendSlot& slot, std::span<const fabric::Sge> sges,
                                 std::shared_ptr<PipelinedSend> reader) {
  IBDT_RETURN_IF_ERROR(postSlot(peers_[static_cast<size_t>(rank)], slot.index, sges, "a message fragment"));
  slotOwner_[slot.index] = std::move(reader);  // the user blocks are read until it completes
  return Status::ok();
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

// OneSided::Host: a put's writes, all or none.
Result<bool> ContextImpl::postAllOrNone(int rank, std::vector<fabric::SendRequest>& requests) {
  Peer& peer = peers_[static_cast<size_t>(rank)];
  if (!connections_.ready(rank) || peer.sendOutstanding + requests.size() > sendQueueDepth_) return false;
  IBDT_RETURN_IF_ERROR(post(peer, requests));
  return true;
}

}  // namespace ibdt::messaging
