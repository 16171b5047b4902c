// Control messages: each one parsed (a message too short or lying about its
// size is its sender's fault) and handed to its protocol.
#include "transport/messaging/arrivals.h"

namespace ibdt::messaging {
namespace {

// A field of a control message from `peer`; a message too short for it is
// that peer's fault, so the error names it.
template <typename T>
Result<T> readFrom(const Peer& peer, std::span<const uint8_t> message, size_t offset) {
  auto value = wire::read<T>(message, offset);
  if (!value.isOk()) return std::move(value).takeStatus().withContext(strCat("rank ", peer.rank()));
  return value;
}

}  // namespace

Status Arrivals::dispatch(Peer& peer, std::span<const uint8_t> message) {
  IBDT_ASSIGN_OR_RETURN(wire::Header header, readFrom<wire::Header>(peer, message, 0));
  IBDT_RETURN_IF_ERROR(parts_.credits.returned(peer.rank(), header));
  size_t offset = sizeof(header);
  bool startsMessage =
      header.kind == wire::Kind::kEager || header.kind == wire::Kind::kRts || header.kind == wire::Kind::kPipelined;
  if (startsMessage && peer.inbound().active()) {
    return makeError(Code::kProtocol, "rank ", peer.rank(), " started a message at byte ", peer.inbound().received(),
                     " of its ", peer.inbound().bytes(), "-byte pipelined message");
  }
  switch (header.kind) {
    case wire::Kind::kEager:
      return dispatchEager(peer, message, offset);
    case wire::Kind::kPipelined:
      return dispatchPipelined(peer, message, offset);
    case wire::Kind::kFragment: {
      IBDT_ASSIGN_OR_RETURN(auto fragment, readFrom<wire::Fragment>(peer, message, offset));
      return handleFragment(peer, fragment, message.subspan(offset + sizeof(fragment)));
    }
    case wire::Kind::kRts:
      return dispatchRts(peer, message, offset);
    case wire::Kind::kCts:
      return dispatchCts(peer, message, offset);
    case wire::Kind::kPacked: {
      IBDT_ASSIGN_OR_RETURN(auto packed, readFrom<wire::Packed>(peer, message, offset));
      return parts_.receiver.onPacked(peer.rank(), packed);
    }
    case wire::Kind::kFin: {
      IBDT_ASSIGN_OR_RETURN(auto fin, readFrom<wire::Fin>(peer, message, offset));
      return parts_.sender.onFin(peer.rank(), fin);
    }
    case wire::Kind::kRelease: {
      IBDT_ASSIGN_OR_RETURN(auto release, readFrom<wire::Release>(peer, message, offset));
      return parts_.sender.onRelease(peer.rank(), release);
    }
    case wire::Kind::kCredit:
      return Status::ok();
    case wire::Kind::kGiveBack:
      if (!parts_.credits.pool().enabled()) {
        return makeError(Code::kProtocol, "rank ", peer.rank(), " gave back a credit without IBDT_MSG_EAGER_POOL on our side");
      }
      return Status::ok();
    case wire::Kind::kClose:
      return host_.handleClose(peer);
  }
  return makeError(Code::kProtocol, "unknown control message kind ", static_cast<int>(header.kind), " from rank ",
                   peer.rank());
}

// The message kinds whose body is more than one record, at `offset` (after the header).
Status Arrivals::dispatchEager(Peer& peer, std::span<const uint8_t> message, size_t offset) {
  IBDT_ASSIGN_OR_RETURN(auto envelope, readFrom<wire::Envelope>(peer, message, offset));
  auto payload = message.subspan(offset + sizeof(envelope));
  if (envelope.bytes < 0 || static_cast<uint64_t>(envelope.bytes) != payload.size()) {
    return makeError(Code::kProtocol, "eager message from rank ", peer.rank(), " claims ", envelope.bytes,
                     " bytes and carries ", payload.size());
  }
  handleEager(peer, envelope, payload);
  return Status::ok();
}

Status Arrivals::dispatchPipelined(Peer& peer, std::span<const uint8_t> message, size_t offset) {
  IBDT_ASSIGN_OR_RETURN(auto envelope, readFrom<wire::Envelope>(peer, message, offset));
  auto payload = message.subspan(offset + sizeof(envelope));
  if (payload.empty() || envelope.bytes <= static_cast<int64_t>(payload.size())) {
    return makeError(Code::kProtocol, "pipelined message from rank ", peer.rank(), " claims ", envelope.bytes,
                     " bytes and starts with ", payload.size());
  }
  return handlePipelined(peer, envelope, payload);
}

Status Arrivals::dispatchRts(Peer& peer, std::span<const uint8_t> message, size_t offset) {
  IBDT_ASSIGN_OR_RETURN(auto envelope, readFrom<wire::Envelope>(peer, message, offset));
  IBDT_ASSIGN_OR_RETURN(auto rts, readFrom<wire::Rts>(peer, message, offset + sizeof(envelope)));
  if (envelope.bytes <= 0) return makeError(Code::kProtocol, "RTS from rank ", peer.rank(), " with no data");
  handleRts(peer, envelope, rts);
  return Status::ok();
}

Status Arrivals::dispatchCts(Peer& peer, std::span<const uint8_t> message, size_t offset) {
  IBDT_ASSIGN_OR_RETURN(auto cts, readFrom<wire::Cts>(peer, message, offset));
  auto layout = message.subspan(offset + sizeof(cts));
  if (cts.hasLayout && layout.size() != cts.layoutBytes) {
    return makeError(Code::kProtocol, "CTS from rank ", peer.rank(), " for transfer ", cts.senderTransfer,
                     " announces a ", cts.layoutBytes, "-byte layout and carries ", layout.size());
  }
  return parts_.sender.onCts(peer.rank(), cts, cts.hasLayout ? layout : std::span<const uint8_t>());
}

void Arrivals::handleRts(Peer& peer, const wire::Envelope& envelope, const wire::Rts& rts) {
  std::shared_ptr<Operation> op;
  auto unexpected = parts_.matching.match(peer.rank(), envelope, &op);
  if (!unexpected.isOk()) {
    host_.failPeer(peer.rank(), unexpected.status());
    return;
  }
  if (!op) {
    (*unexpected)->kind = wire::Kind::kRts;
    (*unexpected)->rts = rts;
    return;
  }
  Status status = parts_.receiver.accept(std::move(op), peer.rank(), envelope, rts);
  if (!status.isOk()) host_.failPeer(peer.rank(), status);
}

}  // namespace ibdt::messaging
