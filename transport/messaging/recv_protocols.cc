// The receiver's rendezvous protocols (recv_protocol.h).
#include <algorithm>

#include "base/log.h"
#include "transport/messaging/recv_protocol.h"

namespace ibdt::messaging {
namespace {

class UnpackReceive : public RecvProtocol {
 public:
  explicit UnpackReceive(uint32_t ringSegmentsMax) : ringSegmentsMax_(ringSegmentsMax) {}
  bool unpacks() const override { return true; }

  Result<bool> start(ProtocolServices& services, const Operation& op, CtsDraft& draft, std::string&) override {
    wire::Cts& cts = draft.cts;
    const Scheme forced = draft.forced;
    const bool generic = forced == Scheme::kGeneric;
    cts.mode = wire::ReplyMode::kUnpack;
    cts.scheme = static_cast<uint8_t>(
        forced == Scheme::kGeneric || forced == Scheme::kBcSpup || forced == Scheme::kRwgUp ? forced : Scheme::kAuto);
    segmentSize_ = generic ? cts.bytes : draft.segmentSize;
    // A ring of segments bounds the staging of a large message (and keeps
    // it in cache); the generic baseline stages the whole message.
    if (!generic && wire::segmentCount(cts.bytes, segmentSize_) > ringSegmentsMax_) ringSegments_ = ringSegmentsMax_;
    int64_t staging = ringSegments_ != 0 ? ringSegments_ * segmentSize_ : cts.bytes;
    IBDT_ASSIGN_OR_RETURN(buffer_, generic ? services.dedicatedBuffer(static_cast<size_t>(staging))
                                           : services.pooledBuffer(static_cast<size_t>(staging), op.peer));
    cts.remoteAddress = buffer_.address();
    cts.remoteLength = buffer_.size();
    cts.rkey = buffer_.rkey();
    cts.segmentSize = segmentSize_;
    cts.ringSegments = ringSegments_;
    return true;
  }

  // Segment unpack: this segment has landed, the next one may be in flight.
  Result<bool> onWrite(ProtocolServices& services, const Operation& op, uint32_t senderTransfer,
                       int64_t bytes) override {
    int64_t end = std::min(bytes, unpacked_ + segmentSize_);
    int64_t at = unpacked_;
    if (ringSegments_ != 0) at = static_cast<int64_t>(segmentsDone_ % ringSegments_) * segmentSize_;
    IBDT_RETURN_IF_ERROR(op.segment->unpack(op.recvBuffer, unpacked_, end, buffer_.data() + at));
    unpacked_ = end;
    ++segmentsDone_;
    if (end == bytes) return true;
    releaseRing(services, op.peer, senderTransfer, bytes);
    return false;
  }

 private:
  // Frees ring slots half a ring at a time (fewer control messages, and the
  // sender has the other half to write meanwhile), and only while a segment
  // still waits for a slot: the sender cannot have finished then.
  void releaseRing(ProtocolServices& services, int rank, uint32_t senderTransfer, int64_t bytes) {
    uint64_t segments = wire::segmentCount(bytes, segmentSize_);
    if (ringSegments_ == 0 || segments <= segmentsReleased_ + ringSegments_ ||
        segmentsDone_ - segmentsReleased_ < std::max<uint32_t>(1, ringSegments_ / 2)) {
      return;
    }
    segmentsReleased_ = segmentsDone_;
    std::vector<uint8_t> release(sizeof(wire::Header) + sizeof(wire::Release));
    size_t offset = wire::write(release.data(), 0, wire::Header{wire::Kind::kRelease, 0, {}, 0});
    wire::write(release.data(), offset, wire::Release{senderTransfer, 0, segmentsDone_});
    services.queueControl(rank, std::move(release));
  }

  uint32_t ringSegmentsMax_;
  int64_t segmentSize_ = 0;
  int64_t unpacked_ = 0;
  Staging buffer_;
  uint32_t ringSegments_ = 0;  // 0: buffer_ holds the whole message
  uint64_t segmentsDone_ = 0;
  uint64_t segmentsReleased_ = 0;
};

class ZeroCopyReceive : public RecvProtocol {
 public:
  bool unpacks() const override { return false; }
  const UserRegistration* registration() const override { return &registration_; }

  Result<bool> start(ProtocolServices& services, const Operation& op, CtsDraft& draft, std::string& why) override {
    // Section 4.4.2: the reply carries the layout once per (type id,
    // version); one too large for a control message cannot go.
    bool layoutNeeded = !op.stats.contiguous && !services.layoutCached(op.peer, op.type);
    if (layoutNeeded) {
      IBDT_ASSIGN_OR_RETURN(draft.layout, datatype::serialize(op.type));
      if (sizeof(wire::Header) + sizeof(wire::Cts) + draft.layout.size() > services.controlCapacity()) {
        why = strCat("receive layout of ", draft.layout.size(), " bytes exceeds an eager buffer");
        return false;
      }
    }
    // A peer writes with one rkey: the receive buffer's span must register
    // as one region (it cannot where unmapped pages lie inside it).
    auto registration =
        services.registerUser(op, draft.cts.bytes, fabric::kLocalWrite | fabric::kRemoteWrite, true);
    if (!registration.isOk()) {
      why = registration.status().toString();
      return false;
    }
    registration_ = std::move(registration).value();
    describe(op, draft.cts);
    if (layoutNeeded) {
      draft.cts.hasLayout = 1;
      draft.cts.layoutBytes = static_cast<uint32_t>(draft.layout.size());
      services.layoutSent(op.peer, op.type);
    }
    return true;
  }

  Result<bool> onWrite(ProtocolServices&, const Operation&, uint32_t, int64_t) override { return true; }

 private:
  void describe(const Operation& op, wire::Cts& cts) const {
    cts.mode = wire::ReplyMode::kZeroCopy;
    cts.remoteAddress = registration_.firstAddress();
    cts.remoteLength = registration_.front().region().length();
    cts.rkey = registration_.front().rkey();
    cts.baseAddress = reinterpret_cast<uint64_t>(op.recvBuffer);
    cts.count = op.count;
    cts.typeId = op.type.id();
    cts.typeVersion = op.type.version();
  }

  UserRegistration registration_;
};

}  // namespace

std::unique_ptr<RecvProtocol> makeUnpackReceive(uint32_t ringSegmentsMax) {
  return std::make_unique<UnpackReceive>(ringSegmentsMax);
}

std::unique_ptr<RecvProtocol> makeZeroCopyReceive() { return std::make_unique<ZeroCopyReceive>(); }

}  // namespace ibdt::messaging
