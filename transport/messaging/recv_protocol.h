// transport/messaging/recv_protocol.h — the receiver's side of a
// rendezvous, one object per reply mode, holding what that mode needs:
//   UnpackReceive    a staging buffer (a ring of segments for a large
//                    message) the sender writes into; each segment is
//                    unpacked as its immediate arrives, and ring slots are
//                    released back to the sender (BC-SPUP, RWG-UP, Generic);
//   ZeroCopyReceive  the user buffer registered as one region and, for a
//                    noncontiguous type, its layout sent once per (type id,
//                    version) (Multi-W, contiguous; P-RRS reads into it).
// Which mode a reply takes is ProtocolSelector::replyUnpacks (the objects
// come from ProtocolSelector::zeroCopyReply and unpackReply); a zero-copy
// reply that cannot be made (a layout too large for a control message, a
// buffer that does not register as one region) falls back to unpacking.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transport/messaging/protocol_services.h"

namespace ibdt::messaging {

// The reply (CTS) being drafted.
struct CtsDraft {
  wire::Cts cts{};
  Scheme forced = Scheme::kAuto;  // the scheme forced by either side, dropped where it cannot apply
  int64_t segmentSize = 0;        // of an unpack reply (segmentSizeFor)
  std::vector<uint8_t> layout;    // the receive layout, when the sender lacks it
};

class RecvProtocol {
 public:
  virtual ~RecvProtocol() = default;
  virtual bool unpacks() const = 0;
  // Readies the receive `op` for the reply in `draft` and describes it
  // there. false: this mode cannot take it (`why`), nothing was changed
  // that the fallback does not reset.
  virtual Result<bool> start(ProtocolServices& services, const Operation& op, CtsDraft& draft, std::string& why) = 0;
  // A write with immediate landed. true: all `bytes` are in the receive.
  virtual Result<bool> onWrite(ProtocolServices& services, const Operation& op, uint32_t senderTransfer,
                               int64_t bytes) = 0;
  // The receive buffer's registration (zero-copy), for P-RRS reads.
  virtual const UserRegistration* registration() const { return nullptr; }
};

std::unique_ptr<RecvProtocol> makeUnpackReceive(uint32_t ringSegmentsMax);
std::unique_ptr<RecvProtocol> makeZeroCopyReceive();

}  // namespace ibdt::messaging
