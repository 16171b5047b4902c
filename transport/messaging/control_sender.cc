// Messages out to each peer (control_sender.h).
#include "transport/messaging/control_sender.h"

#include "transport/messaging/rendezvous_services.h"

namespace ibdt::messaging {

bool ControlSender::canPostNow(const Peer& peer) const {
  const int rank = peer.rank();
  return parts_.connections.ready(rank) && parts_.credits.available(rank) > 0 && parts_.slots.anyFree() &&
         peer.sendFits(parts_.limits.sendQueueDepth);
}

Status ControlSender::flush(Peer& peer) {
  int rank = peer.rank();
  if (!parts_.connections.ready(rank)) return Status::ok();  // queued until the connection is up
  while (!peer.control().empty() && canPostNow(peer)) {
    IBDT_RETURN_IF_ERROR(peer.control().postFront(*this, rank));
  }
  if (!peer.control().empty() && parts_.credits.available(rank) == 0) parts_.credits.stalled(rank);
  return Status::ok();
}

wire::Header ControlSender::headerTo(int rank, wire::Kind kind) const {
  const Peer& to = parts_.peers.peer(rank);
  return parts_.credits.header(rank, kind, to.control().size() > parts_.credits.available(rank));
}

Status ControlSender::giveBackIfAsked(Peer& peer) {
  const int rank = peer.rank();
  if (!parts_.credits.giveBackAsked(rank) || !peer.control().empty()) return Status::ok();
  // Each kGiveBack spends one of the credits it gives back: the peer keeps
  // the buffer it lands in.
  while (parts_.credits.surplusAsked(rank) > 0 && parts_.slots.anyFree() &&
         peer.sendFits(parts_.limits.sendQueueDepth)) {
    IBDT_RETURN_IF_ERROR(ControlMessage::headerOnly(wire::Kind::kGiveBack).post(*this, rank, /*useReserve=*/false));
    parts_.credits.gaveBack();
  }
  if (parts_.credits.surplusAsked(rank) == 0) parts_.credits.giveBackDone(rank);
  return Status::ok();
}

Status ControlSender::sendCreditIfOwed(Peer& peer) {
  if (!parts_.credits.creditMessageDue(peer.rank())) return Status::ok();
  if (!peer.sendFits(parts_.limits.sendQueueDepth)) return Status::ok();
  Result<bool> sent = sendReserved(peer, wire::Kind::kCredit);
  if (sent.isOk() && *sent) parts_.credits.creditMessageSent();
  return sent.status();
}

Result<bool> ControlSender::sendReserved(Peer& peer, wire::Kind kind) {
  if (!parts_.slots.anyFree()) return false;
  IBDT_RETURN_IF_ERROR(ControlMessage::headerOnly(kind).post(*this, peer.rank(), /*useReserve=*/true));
  return true;
}

Result<bool> ControlSender::sendWritten(int rank, uint32_t length, WriteFunction write, void* context,
                                        Status& writeError) {
  Peer& peer = this->peer(rank);
  if (inPlaceSends_) {
    // Unsignaled: once posted there is nothing to free; a failure still completes.
    fabric::PackedSend send{wrId(WrKind::kInPlace, 0), 0, length, write, context};
    Status status = peer.postPacked(send);
    if (status.isOk()) return true;
    if (status.code() == Code::kUnsupported) {
      inPlaceSends_ = false;
    } else if (status.code() != Code::kAgain) {
      writeError = std::move(status);
      return false;
    }
  }
  IBDT_ASSIGN_OR_RETURN(SendSlot slot, parts_.slots.take());
  Status written = write(context, slot.data);
  if (!written.isOk()) {
    parts_.slots.giveBack(slot.index);
    writeError = std::move(written);
    return false;
  }
  fabric::Sge sge{reinterpret_cast<uint64_t>(slot.data), length, slot.lkey};
  IBDT_RETURN_IF_ERROR(postSlot(peer, slot.index, std::span(&sge, 1), "a control message"));
  return true;
}

SgeOut ControlSender::gatherScratch() {
  scratch_.iovecs.resize(parts_.limits.maxSge);
  return SgeOut{scratch_.sges, scratch_.iovecs};
}

Status ControlSender::postGathered(int rank, const SendSlot& slot, std::span<const fabric::Sge> sges,
                                   std::shared_ptr<PipelinedSend> reader) {
  IBDT_RETURN_IF_ERROR(postSlot(peer(rank), slot.index, sges, "a message fragment"));
  parts_.slots.lend(slot.index, std::move(reader));  // the user blocks are read until it completes
  return Status::ok();
}

Status ControlSender::postSlot(Peer& peer, uint32_t slot, std::span<const fabric::Sge> sges, std::string_view what) {
  uint64_t length = 0;
  for (const fabric::Sge& sge : sges) length += sge.length;
  fabric::SendRequest request;
  request.id = wrId(WrKind::kSlot, slot);
  request.opcode = fabric::Opcode::kSend;
  request.flags = fabric::kSignaled;
  if (length <= domain_.caps().maxInline) request.flags |= fabric::kInline;
  request.sgList = sges.data();
  request.numSge = static_cast<uint32_t>(sges.size());
  Status status = peer.postSend(request);
  if (!status.isOk()) {
    parts_.slots.giveBack(slot);
    return status.withContext(strCat("sending ", what, " to rank ", peer.rank()));
  }
  return Status::ok();
}

}  // namespace ibdt::messaging
