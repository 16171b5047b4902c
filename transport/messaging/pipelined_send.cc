// Pipelined eager, the sender (pipelined_send.h).
#include "transport/messaging/pipelined_send.h"

#include <algorithm>

#include "base/log.h"
#include "transport/messaging/protocol_select.h"

namespace ibdt::messaging {
namespace {

// The header of a fragment at packed byte `offset`: the first carries the
// envelope, the others their offset. Returns the bytes written.
size_t writeFragmentHeader(uint8_t* out, const wire::Header& header, const wire::Envelope& envelope, int64_t offset) {
  size_t at = wire::write(out, 0, header);
  return header.kind == wire::Kind::kPipelined ? wire::write(out, at, envelope)
                                               : wire::write(out, at, wire::Fragment{offset});
}

}  // namespace

bool PipelinedSend::begin(EagerServices& services, int rank) {
  Operation& op = *op_;
  // Failures here are this send's own, as for an eager send: nothing left yet.
  Status status = op.ensureStats(services.types());
  auto signature = services.types().signature(op.type, op.count);
  if (status.isOk()) status = signature.status();
  if (!status.isOk()) {
    finish(std::move(status));
    return false;
  }
  envelope_ =
      wire::Envelope{services.selfRank(), op.tag, op.communicator, 0, op.bytes, signature->hash, signature->elements};
  const ProtocolSelector& selector = services.selector();
  gather_ = selector.fragmentsGather(op.stats);
  if (gather_) {
    auto registration = services.registerUser(op, op.bytes, fabric::kLocalWrite, false);
    if (registration.isOk()) {
      gathered_ = std::move(registration).value();
    } else {
      IBDT_LOG(kDebug, "messaging: pipelined send packs instead: ", registration.status().toString());
      gather_ = false;
    }
  }
  IBDT_LOG(kDebug, "messaging: send of ", op.bytes, " B to rank ", rank, ": pipelined, ",
           gather_ ? "gathered" : "packed", " (mean block ", op.stats.meanBlock, " B, pack below ",
           selector.packBelow(), " B), fragments of ", selector.fragmentSize(op.bytes), " B");
  return true;
}

Result<bool> PipelinedSend::postNext(EagerServices& services, int rank) {
  Operation& op = *op_;
  const bool first = next_ == 0;
  if (first && !begin(services, rank)) return true;
  const int64_t p = next_;
  int64_t q = std::min(op.bytes, p + services.selector().fragmentSize(op.bytes));
  wire::Header header = services.headerTo(rank, first ? wire::Kind::kPipelined : wire::Kind::kFragment);
  Status failed;
  bool sent = false;
  if (gather_) {
    IBDT_ASSIGN_OR_RETURN(sent, postGathered(services, rank, header, q, failed));
  } else {
    IBDT_ASSIGN_OR_RETURN(sent, postPacked(services, rank, header, q, failed));
  }
  if (!sent) {
    // Before the first fragment left it is this send's own failure; after, the
    // peer would wait for the rest forever.
    if (!first) return failed.withContext(strCat("fragment at byte ", p, " of a message to rank ", rank));
    finish(std::move(failed));
    return true;
  }
  services.messageSent(rank, /*spendsCredit=*/true);
  next_ = q;
  if (q == op.bytes) {
    allPosted_ = true;
    if (inFlight_ == 0) finish(Status::ok());
  }
  return allPosted_;
}

Result<bool> PipelinedSend::postPacked(EagerServices& services, int rank, const wire::Header& header, int64_t q,
                                       Status& failed) {
  // Packed where it lands: the peer's receive buffer on shm, else a send slot.
  struct Writer {
    const Operation& op;
    wire::Header header;
    wire::Envelope envelope;
    int64_t p, q;
  } writer{*op_, header, envelope_, next_, q};
  EagerServices::WriteFunction write = [](void* context, uint8_t* out) -> Status {
    auto& w = *static_cast<Writer*>(context);
    size_t at = writeFragmentHeader(out, w.header, w.envelope, w.p);
    return w.op.segment->pack(w.op.sendBuffer, w.p, w.q, out + at);
  };
  const bool first = header.kind == wire::Kind::kPipelined;
  size_t length =
      sizeof(header) + (first ? sizeof(wire::Envelope) : sizeof(wire::Fragment)) + static_cast<size_t>(q - next_);
  return services.sendWritten(rank, static_cast<uint32_t>(length), write, &writer, failed);
}

Result<bool> PipelinedSend::postGathered(EagerServices& services, int rank, const wire::Header& header, int64_t& q,
                                         Status& failed) {
  Operation& op = *op_;
  const int64_t p = next_;
  IBDT_ASSIGN_OR_RETURN(SendSlot slot, services.takeSendSlot());
  size_t length = writeFragmentHeader(slot.data, header, envelope_, p);
  // SGE 0 the header, then the user blocks of [p, q), as many as fit.
  SgeOut out = services.gatherScratch();
  out.sges.assign(1, fabric::Sge{reinterpret_cast<uint64_t>(slot.data), static_cast<uint32_t>(length), slot.lkey});
  auto fill = op.segment->iovecs(reinterpret_cast<uint64_t>(op.sendBuffer), p, q, out.iovecs.data(),
                                 std::max<size_t>(1, out.iovecs.size() - 1));
  if (!fill.isOk()) {
    services.returnSendSlot(slot.index);
    failed = fill.status();
    return false;
  }
  for (size_t i = 0; i < fill->entries; ++i) {
    const datatype::Iovec& block = out.iovecs[i];
    out.sges.push_back(
        {block.address, static_cast<uint32_t>(block.length), gathered_.lkey(block.address, block.length)});
  }
  q = p + fill->bytes;
  IBDT_RETURN_IF_ERROR(services.postGathered(rank, slot, out.sges, shared_from_this()));
  ++inFlight_;
  return true;
}

void PipelinedSend::fragmentSent(Status status) {
  --inFlight_;
  if (op_->done) return;  // failed already (its peer failed)
  if (!status.isOk())
    finish(std::move(status));
  else if (allPosted_ && inFlight_ == 0)
    finish(Status::ok());
}

}  // namespace ibdt::messaging
