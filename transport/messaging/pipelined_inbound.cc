// A pipelined eager message arriving from a peer (pipelined_inbound.h).
#include "transport/messaging/pipelined_inbound.h"

#include <algorithm>

#include "transport/messaging/eager_receive.h"

namespace ibdt::messaging {

void PipelinedInbound::begin(const wire::Envelope& envelope, size_t firstBytes) {
  *this = PipelinedInbound{};
  active_ = true;
  envelope_ = envelope;
  received_ = static_cast<int64_t>(firstBytes);
}

void PipelinedInbound::startMatched(std::shared_ptr<Operation> op, TypeCache& types, int source,
                                    const wire::Envelope& envelope, std::span<const uint8_t> payload) {
  begin(envelope, payload.size());
  failure_ = beginEager(*op, types, source, envelope, Scheme::kPipelined);
  if (failure_.isOk()) failure_ = unpackEager(*op, 0, payload);
  op_ = std::move(op);
}

size_t PipelinedInbound::startUnexpected(Unexpected& unexpected, const wire::Envelope& envelope,
                                         std::span<const uint8_t> payload, int64_t pipelineLimit) {
  begin(envelope, payload.size());
  unexpected.kind = wire::Kind::kPipelined;
  unexpected.payload.reserve(static_cast<size_t>(std::min<int64_t>(envelope.bytes, pipelineLimit)));
  unexpected.payload.assign(payload.begin(), payload.end());
  unexpected_ = &unexpected;
  return unexpected.payload.capacity();  // reserved for the whole message
}

Status PipelinedInbound::onFragment(int rank, const wire::Fragment& fragment, std::span<const uint8_t> payload,
                                    size_t& held) {
  held = 0;
  if (!active_ || fragment.offset != received_ || payload.empty() ||
      static_cast<int64_t>(payload.size()) > envelope_.bytes - received_) {
    return makeError(Code::kProtocol, "rank ", rank, " sent a ", payload.size(), "-byte fragment at byte ",
                     fragment.offset,
                     active_ ? strCat(" of a ", envelope_.bytes, "-byte message at byte ", received_)
                             : std::string(" of no message"));
  }
  if (op_) {
    if (failure_.isOk()) failure_ = unpackEager(*op_, fragment.offset, payload);
  } else if (unexpected_ != nullptr) {
    size_t before = unexpected_->payload.capacity();
    unexpected_->payload.insert(unexpected_->payload.end(), payload.begin(), payload.end());
    held = unexpected_->payload.capacity() - before;
  }
  received_ += static_cast<int64_t>(payload.size());
  if (received_ == envelope_.bytes) {
    if (op_) finishEager(*op_, envelope_, std::move(failure_));
    *this = PipelinedInbound{};
  }
  return Status::ok();
}

void PipelinedInbound::adopt(std::shared_ptr<Operation> op, TypeCache& types, const Unexpected& unexpected) {
  unexpected_ = nullptr;
  failure_ = beginEager(*op, types, unexpected.peer, unexpected.wireEnvelope, Scheme::kPipelined);
  if (failure_.isOk()) failure_ = unpackEager(*op, 0, unexpected.payload);
  op_ = std::move(op);
}

Unexpected* PipelinedInbound::drop(const Status& failure) {
  if (op_) completeOperation(*op_, failure);
  Unexpected* left = unexpected_;
  *this = PipelinedInbound{};
  return left;
}

}  // namespace ibdt::messaging
