// A peer's link, failure and layout caches (peer.h).
#include "transport/messaging/peer.h"

#include "base/log.h"
#include "transport/messaging/rendezvous_services.h"

namespace ibdt::messaging {
namespace {

// A receiver layout (or count) from the peer that does not decode: its
// fault whatever the datatype layer calls it.
Status unusableLayout(int rank, const wire::Cts& cts, const Status& why) {
  return makeError(Code::kProtocol, "rank ", rank, " sent an unusable layout (count ", cts.count, ") for transfer ",
                   cts.senderTransfer, ": ", why.toString());
}

}  // namespace

Status Peer::openSlots(fabric::Domain& domain, uint32_t depth, size_t slotSize) {
  slotSize_ = slotSize;
  IBDT_ASSIGN_OR_RETURN(recvSlots_, domain.allocateMemory(depth * slotSize, fabric::kLocalWrite));
  for (uint32_t slot = 0; slot < depth; ++slot) IBDT_RETURN_IF_ERROR(repostSlot(slot));
  return Status::ok();
}

Status Peer::repostSlot(uint32_t slot) {
  fabric::Sge sge{reinterpret_cast<uint64_t>(recvSlots_->address()) + slot * slotSize_,
                  static_cast<uint32_t>(slotSize_), recvSlots_->lkey()};
  fabric::RecvRequest request;
  request.id = slotWorkId(slot);
  request.sgList = &sge;
  request.numSge = 1;
  return recvEndpoint_->postRecv(request);
}

uint64_t Peer::slotWorkId(uint32_t slot) const {
  return wrId(WrKind::kRecvSlot, (uint64_t{static_cast<uint32_t>(rank_)} << 24) | slot);
}

uint32_t Peer::slotOf(uint64_t workId) { return static_cast<uint32_t>(wrValue(workId) & 0xffffff); }

std::span<const uint8_t> Peer::slotMessage(uint32_t slot, uint64_t length) const {
  const uint8_t* data = static_cast<const uint8_t*>(recvSlots_->address()) + slot * slotSize_;
  return {data, std::min<size_t>(length, slotSize_)};
}

Status Peer::postSend(const fabric::SendRequest& request) {
  IBDT_RETURN_IF_ERROR(sendEndpoint_->postSend(request));
  ++sendOutstanding_;
  return Status::ok();
}

Status Peer::postChain(std::vector<fabric::SendRequest>& requests) {
  if (requests.empty()) return Status::ok();
  for (size_t i = 0; i + 1 < requests.size(); ++i) requests[i].next = &requests[i + 1];
  requests.back().next = nullptr;
  Status status = sendEndpoint_->postSend(requests.front());
  if (!status.isOk()) {
    // Depth is tracked, so kAgain here means the provider disagrees with it.
    return status.withContext(strCat("posting ", requests.size(), " requests to rank ", rank_));
  }
  sendOutstanding_ += static_cast<uint32_t>(requests.size());
  requests.clear();
  return Status::ok();
}

Status Peer::postRead(const fabric::SendRequest& request) {
  IBDT_RETURN_IF_ERROR(postSend(request));
  ++readsOutstanding_;
  return Status::ok();
}

bool Peer::fail(Status status) {
  if (failed()) return false;
  failure_ = std::move(status);
  return true;
}

Result<datatype::Segment> Peer::receiverLayout(const wire::Cts& cts, std::span<const uint8_t> layout,
                                               Counters& counters) {
  const datatype::Datatype* receiverType = layouts_.received(cts.typeId, cts.typeVersion);
  if (!layout.empty()) {
    auto type = datatype::deserialize(layout);
    if (!type.isOk()) return unusableLayout(rank_, cts, type.status());
    receiverType = &layouts_.store(cts.typeId, cts.typeVersion, std::move(type).value());
  } else if (receiverType == nullptr) {
    return makeError(Code::kProtocol, "rank ", rank_, " refers to layout (", cts.typeId, ", ", cts.typeVersion,
                     ") it never sent, for transfer ", cts.senderTransfer);
  } else {
    ++counters.layoutCacheHits;
  }
  auto segment = datatype::Segment::create(*receiverType, cts.count);
  if (!segment.isOk()) return unusableLayout(rank_, cts, segment.status());
  if (segment->size() < cts.bytes) {
    return makeError(Code::kProtocol, "rank ", rank_, "'s layout holds ", segment->size(), " bytes, it accepted ",
                     cts.bytes, " for transfer ", cts.senderTransfer);
  }
  return segment;
}

}  // namespace ibdt::messaging
