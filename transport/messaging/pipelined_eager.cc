// Pipelined eager: a mid-size message (eagerLimit < bytes <= pipelineLimit)
// leaves as fragments in the peer's eager receive buffers, back to back and
// with no handshake, so the receiver unpacks one fragment while the sender
// fills the next. A rendezvous would spend a round trip before the first
// byte moves, and on shared memory its zero-copy paths cost more per page
// than the copies they save at these sizes.
//
// A sender whose blocks are large enough to use in place (the rendezvous
// sender's rule, senderWantsPack) gathers each fragment straight from the
// user buffer: SGE 0 is the header in a send slot, the rest are user blocks
// of the fragment (at most max_sge - 1, which may cut it short). The shm
// provider copies those into the peer's buffer, a NIC reads them: either way
// nothing is packed. Small blocks are packed into the slot, as eager does.
//
// Fragments share the eager credits and buffers; each one is a credit. The
// message holds the head of its peer's control queue until its last
// fragment left, so nothing that starts another message comes between them
// and the receiver needs one message of state per peer.
#include <algorithm>

#include "base/log.h"
#include "transport/messaging/context_impl.h"

namespace ibdt::messaging {
namespace {

constexpr int64_t kMinFragment = 8192;
constexpr int64_t kFragmentsPerMessage = 4;

// The header of a fragment at packed byte `offset`: the first carries the
// envelope, the others their offset. Returns the bytes written.
size_t writeFragmentHeader(uint8_t* out, const wire::Header& header, const wire::Envelope& envelope,
                           int64_t offset) {
  size_t at = wire::write(out, 0, header);
  return header.kind == wire::Kind::kPipelined ? wire::write(out, at, envelope)
                                               : wire::write(out, at, wire::Fragment{offset});
}

}  // namespace

// Both sides copy at about the same rate, so the message takes one side's
// copy plus a fragment. Each fragment costs a request, a completion and a
// receive repost on top of its bytes: measured on shm, four fragments of
// 8 KiB or more (at most an eager buffer) beat halving schedules and
// uniform 8 KiB ones by 5-30 % at 64-256 KiB.
int64_t ContextImpl::fragmentSize(int64_t bytes) const {
  int64_t limit = std::max<int64_t>(1, options_.eagerLimit);
  if (options_.segmentSize > 0) return std::min(options_.segmentSize, limit);
  int64_t quarter = (bytes + kFragmentsPerMessage - 1) / kFragmentsPerMessage;
  return std::min(limit, std::max(kMinFragment, quarter));
}

// The first fragment's work: the envelope, and gather or pack. false: the
// send failed before anything left (it is complete with its error).
bool ContextImpl::beginPipelined(Peer& peer, PendingControl& message, wire::Envelope& envelope) {
  Operation& op = *message.eager;
  // Failures here are this send's own, as for an eager send: nothing left yet.
  Status status = op.ensureStats(types_);
  auto signature = types_.signature(op.type, op.count);
  if (status.isOk()) status = signature.status();
  if (!status.isOk()) {
    complete(op, std::move(status));
    return false;
  }
  envelope = wire::Envelope{rank_, op.tag, op.communicator, 0, op.bytes, signature->hash, signature->elements};
  message.gather = selector_.fragmentsGather(op.stats);
  if (message.gather) {
    auto registration = registerUser(op, op.bytes, fabric::kLocalWrite, false);
    if (registration.isOk()) {
      op.gathered = std::move(registration).value();
    } else {
      IBDT_LOG(kDebug, "messaging: pipelined send packs instead: ", registration.status().toString());
      message.gather = false;
    }
  }
  IBDT_LOG(kDebug, "messaging: send of ", op.bytes, " B to rank ", peer.rank, ": pipelined, ",
           message.gather ? "gathered" : "packed", " (mean block ", op.stats.meanBlock, " B, pack below ",
           selector_.packBelow(), " B), fragments of ", fragmentSize(op.bytes), " B");
  return true;
}

Status ContextImpl::postFragment(Peer& peer, PendingControl& message) {
  Operation& op = *message.eager;
  const bool first = message.next == 0;
  wire::Envelope envelope{};
  if (first && !beginPipelined(peer, message, envelope)) return Status::ok();
  const int64_t p = message.next;
  int64_t q = std::min(op.bytes, p + fragmentSize(op.bytes));
  wire::Header header{first ? wire::Kind::kPipelined : wire::Kind::kFragment, {}, credits_.owedTo(peer.rank)};
  Status failed;
  bool sent = false;
  if (message.gather) {
    IBDT_ASSIGN_OR_RETURN(sent, postGatheredFragment(peer, message, header, envelope, q, failed));
  } else {
    // Packed where it lands: the peer's receive buffer on shm, else a send slot.
    struct Writer {
      const Operation& op;
      wire::Header header;
      wire::Envelope envelope;
      int64_t p, q;
    } writer{op, header, envelope, p, q};
    WriteFunction write = [](void* context, uint8_t* out) -> Status {
      auto& w = *static_cast<Writer*>(context);
      size_t at = writeFragmentHeader(out, w.header, w.envelope, w.p);
      return w.op.segment->pack(w.op.sendBuffer, w.p, w.q, out + at);
    };
    size_t length = sizeof(header) + (first ? sizeof(envelope) : sizeof(wire::Fragment)) + static_cast<size_t>(q - p);
    IBDT_ASSIGN_OR_RETURN(sent, sendWritten(peer, static_cast<uint32_t>(length), write, &writer, failed));
  }
  if (!sent) {
    // Before the first fragment left it is this send's own failure; after, the
    // peer would wait for the rest forever.
    if (!first) return failed.withContext(strCat("fragment at byte ", p, " of a message to rank ", peer.rank));
    complete(op, std::move(failed));
    return Status::ok();
  }
  credits_.sent(peer.rank, /*spendsCredit=*/true);
  message.next = q;
  if (q == op.bytes) {
    op.fragmentsPosted = true;
    if (op.fragmentsInFlight == 0) complete(op, Status::ok());
  }
  return Status::ok();
}

Result<bool> ContextImpl::postGatheredFragment(Peer& peer, PendingControl& message, const wire::Header& header,
                                               const wire::Envelope& envelope, int64_t& q, Status& failed) {
  Operation& op = *message.eager;
  const int64_t p = message.next;
  IBDT_ASSIGN_OR_RETURN(uint32_t slot, takeSendSlot());
  uint8_t* data = static_cast<uint8_t*>(sendSlots_->address()) + slot * slotSize();
  size_t length = writeFragmentHeader(data, header, envelope, p);
  // SGE 0 the header, then the user blocks of [p, q), as many as fit.
  std::vector<fabric::Sge>& sges = scratch_.sges;
  sges.assign(1, fabric::Sge{reinterpret_cast<uint64_t>(data), static_cast<uint32_t>(length), sendSlots_->lkey()});
  std::vector<datatype::Iovec>& iovecs = scratch_.iovecs;
  iovecs.resize(maxSge_);
  auto fill = op.segment->iovecs(reinterpret_cast<uint64_t>(op.sendBuffer), p, q, iovecs.data(),
                                 std::max<uint32_t>(1, maxSge_ - 1));
  if (!fill.isOk()) {
    freeSendSlots_.push_back(slot);
    failed = fill.status();
    return false;
  }
  for (size_t i = 0; i < fill->entries; ++i) {
    sges.push_back({iovecs[i].address, static_cast<uint32_t>(iovecs[i].length),
                    op.gathered.lkey(iovecs[i].address, iovecs[i].length)});
  }
  q = p + fill->bytes;
  IBDT_RETURN_IF_ERROR(postSlot(peer, slot, sges, "a message fragment"));
  slotOwner_[slot] = message.eager;  // the user blocks are read until it completes
  ++op.fragmentsInFlight;
  return true;
}

void ContextImpl::fragmentSent(uint32_t slot, Status status) {
  std::shared_ptr<Operation> op = std::move(slotOwner_[slot]);
  if (!op) return;
  --op->fragmentsInFlight;
  if (op->done) return;  // failed already (its peer failed)
  if (!status.isOk()) complete(*op, std::move(status));
  else if (op->fragmentsPosted && op->fragmentsInFlight == 0) complete(*op, Status::ok());
}

Status ContextImpl::handlePipelined(Peer& peer, const wire::Envelope& envelope, std::span<const uint8_t> payload) {
  std::shared_ptr<Operation> op;
  IBDT_ASSIGN_OR_RETURN(Unexpected * unexpected, matchOrQueue(peer, envelope, &op));
  InboundMessage& inbound = peer.inbound;
  inbound = InboundMessage{};
  inbound.active = true;
  inbound.envelope = envelope;
  inbound.received = static_cast<int64_t>(payload.size());
  if (unexpected != nullptr) {
    // Kept as it arrives; a receive posted meanwhile takes it over (adoptInbound).
    unexpected->kind = wire::Kind::kPipelined;
    unexpected->payload.reserve(static_cast<size_t>(std::min<int64_t>(envelope.bytes, options_.pipelineLimit)));
    unexpected->payload.assign(payload.begin(), payload.end());
    holdUnexpected(*unexpected, unexpected->payload.capacity());  // reserved for the whole message
    inbound.unexpected = unexpected;
    return Status::ok();
  }
  inbound.failure = beginEager(*op, peer.rank, envelope, Scheme::kPipelined);
  if (inbound.failure.isOk()) inbound.failure = unpackEager(*op, 0, payload);
  inbound.op = std::move(op);
  return Status::ok();
}

Status ContextImpl::handleFragment(Peer& peer, const wire::Fragment& fragment, std::span<const uint8_t> payload) {
  InboundMessage& inbound = peer.inbound;
  if (!inbound.active || fragment.offset != inbound.received || payload.empty() ||
      static_cast<int64_t>(payload.size()) > inbound.envelope.bytes - inbound.received) {
    return makeError(Code::kProtocol, "rank ", peer.rank, " sent a ", payload.size(), "-byte fragment at byte ",
                     fragment.offset, inbound.active ? strCat(" of a ", inbound.envelope.bytes, "-byte message at byte ",
                                                             inbound.received)
                                                     : std::string(" of no message"));
  }
  if (inbound.op) {
    if (inbound.failure.isOk()) inbound.failure = unpackEager(*inbound.op, fragment.offset, payload);
  } else if (inbound.unexpected != nullptr) {
    size_t before = inbound.unexpected->payload.capacity();
    inbound.unexpected->payload.insert(inbound.unexpected->payload.end(), payload.begin(), payload.end());
    holdUnexpected(*inbound.unexpected, inbound.unexpected->payload.capacity() - before);
  }
  inbound.received += static_cast<int64_t>(payload.size());
  if (inbound.received == inbound.envelope.bytes) {
    if (inbound.op) finishEager(*inbound.op, inbound.envelope, std::move(inbound.failure));
    inbound = InboundMessage{};
  }
  return Status::ok();
}

void ContextImpl::adoptInbound(std::shared_ptr<Operation> op, Unexpected& unexpected) {
  Peer& peer = peers_[static_cast<size_t>(unexpected.peer)];
  peer.inbound.unexpected = nullptr;
  peer.inbound.failure = beginEager(*op, unexpected.peer, unexpected.wireEnvelope, Scheme::kPipelined);
  if (peer.inbound.failure.isOk()) peer.inbound.failure = unpackEager(*op, 0, unexpected.payload);
  peer.inbound.op = std::move(op);
}

void ContextImpl::dropInbound(Peer& peer) {
  InboundMessage& inbound = peer.inbound;
  if (inbound.op) complete(*inbound.op, peer.failure);
  if (inbound.unexpected != nullptr && unexpected_.remove(inbound.unexpected)) {
    releaseUnexpected(*inbound.unexpected);
    delete inbound.unexpected;  // part of a message from a failed peer: no receive may take it
  }
  inbound = InboundMessage{};
}

}  // namespace ibdt::messaging
