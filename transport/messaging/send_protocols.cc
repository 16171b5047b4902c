// The rendezvous send protocols (send_protocol.h), one class per scheme.
#include <algorithm>

#include "transport/messaging/send_protocol.h"

namespace ibdt::messaging {
namespace {

// Writes from one buffer holding the packed message (Generic).
class PackedCopySend : public SendProtocol {
 public:
  Result<bool> start(ProtocolServices& services, const Operation& op, const wire::Cts& cts,
                     std::span<const uint8_t>) override {
    IBDT_ASSIGN_OR_RETURN(packed_, services.dedicatedBuffer(static_cast<size_t>(cts.bytes)));
    IBDT_RETURN_IF_ERROR(op.segment->pack(op.sendBuffer, 0, cts.bytes, packed_.data()));
    return true;
  }
  Result<bool> describe(ProtocolServices&, const Operation&, const wire::Cts&, WriteSlice& slice, SgeOut out) override {
    out.sges.push_back({packed_.address() + static_cast<uint64_t>(slice.begin),
                        static_cast<uint32_t>(slice.end - slice.begin), packed_.lkey()});
    return true;
  }

 private:
  Staging packed_;
};

// BC-SPUP: each write's bytes packed into a pool buffer just before it leaves.
class SegmentPackSend : public SendProtocol {
 public:
  Result<bool> start(ProtocolServices&, const Operation&, const wire::Cts&, std::span<const uint8_t>) override {
    return true;
  }
  Result<bool> describe(ProtocolServices& services, const Operation& op, const wire::Cts&, WriteSlice& slice,
                        SgeOut out) override {
    // Without a credit for its immediate the write waits: do not pack it yet.
    if (slice.signals() && !services.creditFree(op.peer)) return false;
    IBDT_ASSIGN_OR_RETURN(slice.staging, services.pooledBuffer(static_cast<size_t>(slice.end - slice.begin), -1));
    IBDT_RETURN_IF_ERROR(op.segment->pack(op.sendBuffer, slice.begin, slice.end, slice.staging.data()));
    out.sges.push_back({slice.staging.address(), static_cast<uint32_t>(slice.end - slice.begin),
                        slice.staging.lkey()});
    return true;
  }
};

// RWG-UP and contiguous: each write gathers the user blocks it covers.
class GatherSend : public SendProtocol {
 public:
  Result<bool> start(ProtocolServices& services, const Operation& op, const wire::Cts& cts,
                     std::span<const uint8_t>) override {
    IBDT_ASSIGN_OR_RETURN(registration_, services.registerUser(op, cts.bytes, fabric::kLocalWrite, false));
    return true;
  }
  Result<bool> describe(ProtocolServices&, const Operation& op, const wire::Cts&, WriteSlice& slice,
                        SgeOut out) override {
    const uint64_t userBase = reinterpret_cast<uint64_t>(op.sendBuffer);
    IBDT_ASSIGN_OR_RETURN(auto fill, op.segment->iovecs(userBase, slice.begin, slice.end, out.iovecs.data(),
                                                        out.iovecs.size()));
    for (size_t i = 0; i < fill.entries; ++i) {
      const datatype::Iovec& block = out.iovecs[i];
      out.sges.push_back({block.address, static_cast<uint32_t>(block.length),
                          registration_.lkey(block.address, block.length)});
    }
    slice.end = slice.begin + fill.bytes;
    return true;
  }

 private:
  UserRegistration registration_;
};

// Multi-W: one write per receiver block (a contiguous receiver is one
// block), gathering the sender blocks that cover it.
class MultiWriteSend : public GatherSend {
 public:
  Result<bool> start(ProtocolServices& services, const Operation& op, const wire::Cts& cts,
                     std::span<const uint8_t> layout) override {
    IBDT_RETURN_IF_ERROR(GatherSend::start(services, op, cts, layout).status());
    if (!cts.receiverContiguous) {
      IBDT_ASSIGN_OR_RETURN(receiver_, services.receiverLayout(op.peer, cts, layout));
    }
    return true;
  }
  Result<bool> describe(ProtocolServices& services, const Operation& op, const wire::Cts& cts, WriteSlice& slice,
                        SgeOut out) override {
    if (!cts.receiverContiguous) {
      datatype::Iovec block{};
      IBDT_ASSIGN_OR_RETURN(auto fill, receiver_->iovecs(cts.baseAddress, slice.begin, cts.bytes, &block, 1));
      if (fill.entries != 1) return makeError(Code::kInternal, "receiver layout ends at ", slice.begin);
      slice.remote = block.address;
      slice.end = std::min<int64_t>(slice.end, slice.begin + static_cast<int64_t>(block.length));
    }
    return GatherSend::describe(services, op, cts, slice, out);
  }

 private:
  std::optional<datatype::Segment> receiver_;
};

// P-RRS: offers the receiver the packed message (or the contiguous user
// buffer) to READ; this side only waits for its Fin.
class OfferReadSend : public SendProtocol {
 public:
  Result<bool> start(ProtocolServices& services, const Operation& op, const wire::Cts& cts,
                     std::span<const uint8_t>) override {
    wire::Packed packed{cts.receiverTransfer, 0, 0, static_cast<uint64_t>(cts.bytes), 0};
    if (op.stats.contiguous) {  // nothing to pack: the receiver reads the user buffer
      IBDT_ASSIGN_OR_RETURN(registration_,
                            services.registerUser(op, cts.bytes, fabric::kLocalWrite | fabric::kRemoteRead, true));
      packed.address = registration_.firstAddress();
      packed.rkey = registration_.front().rkey();
    } else {
      IBDT_ASSIGN_OR_RETURN(packed_, services.pooledBuffer(static_cast<size_t>(cts.bytes), op.peer));
      IBDT_RETURN_IF_ERROR(op.segment->pack(op.sendBuffer, 0, cts.bytes, packed_.data()));
      packed.address = packed_.address();
      packed.rkey = packed_.rkey();
    }
    std::vector<uint8_t> message(sizeof(wire::Header) + sizeof(packed));
    size_t at = wire::write(message.data(), 0, wire::Header{wire::Kind::kPacked, 0, {}, 0});
    wire::write(message.data(), at, packed);
    services.queueControl(op.peer, std::move(message));
    return false;
  }
  Result<bool> describe(ProtocolServices&, const Operation&, const wire::Cts& cts, WriteSlice&, SgeOut) override {
    return makeError(Code::kInternal, "P-RRS transfer ", cts.senderTransfer, " asked to write");
  }

 private:
  UserRegistration registration_;
  Staging packed_;
};

}  // namespace

std::unique_ptr<SendProtocol> makePackedCopySend() { return std::make_unique<PackedCopySend>(); }
std::unique_ptr<SendProtocol> makeSegmentPackSend() { return std::make_unique<SegmentPackSend>(); }
std::unique_ptr<SendProtocol> makeGatherSend() { return std::make_unique<GatherSend>(); }
std::unique_ptr<SendProtocol> makeMultiWriteSend() { return std::make_unique<MultiWriteSend>(); }
std::unique_ptr<SendProtocol> makeOfferReadSend() { return std::make_unique<OfferReadSend>(); }

}  // namespace ibdt::messaging
