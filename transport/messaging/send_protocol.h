// transport/messaging/send_protocol.h — the data phase of a rendezvous
// send, one object per scheme of Table 1, holding what its scheme needs
// (a packed copy, the registration of the user blocks, the receiver's
// layout). The core (advanceSend) walks the packed byte stream [0, bytes)
// one write at a time within the send queue and the credits; the protocol
// says what each write reads and where it lands:
//   Generic  pack everything into a fresh buffer at start, write from it;
//   BC-SPUP  pack each write's bytes into a pool buffer, WRITE_WITH_IMM it;
//   RWG-UP   gather the user blocks, max_sge per write (also kContiguous);
//   Multi-W  one write per receiver block, gathering the sender blocks that
//            cover it;
//   P-RRS    pack (or expose a contiguous buffer) and let the receiver READ:
//            no writes from this side.
// Which protocol a send takes is ProtocolSelector::sendProtocol's choice
// (protocol_select.h).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "ibdt/fabric.h"
#include "transport/messaging/protocol_services.h"

namespace ibdt::messaging {

// One write of the data phase: packed bytes [begin, end) to `remote`.
struct WriteSlice {
  int64_t begin = 0;
  int64_t end = 0;        // the protocol may cut it short
  int64_t signalAt = 0;   // a write ending here carries the immediate (and spends a credit)
  uint64_t remote = 0;    // where it lands; Multi-W moves it to the receiver's block
  Staging staging;        // a copy the write reads, freed once it completed
  bool signals() const { return end == signalAt; }
};

// Where a protocol lists a write's scatter/gather entries.
struct SgeOut {
  std::vector<fabric::Sge>& sges;
  std::span<datatype::Iovec> iovecs;  // max_sge entries of scratch
};

class SendProtocol {
 public:
  virtual ~SendProtocol() = default;
  // The reply `cts` to the send `op` arrived (its layout, if it carried
  // one): register, pack or adopt the receiver's layout. false: this side
  // posts no writes (it waits for the receiver's Fin).
  virtual Result<bool> start(ProtocolServices& services, const Operation& op, const wire::Cts& cts,
                             std::span<const uint8_t> layout) = 0;
  // Appends the entries of the write of `slice`, cutting its end where one
  // write must stop. false: it waits for a credit, nothing appended.
  virtual Result<bool> describe(ProtocolServices& services, const Operation& op, const wire::Cts& cts,
                                WriteSlice& slice, SgeOut out) = 0;
};

// The protocols, by scheme (ProtocolSelector::sendProtocol chooses).
std::unique_ptr<SendProtocol> makePackedCopySend();  // Generic
std::unique_ptr<SendProtocol> makeSegmentPackSend();  // BC-SPUP
std::unique_ptr<SendProtocol> makeGatherSend();       // RWG-UP, contiguous
std::unique_ptr<SendProtocol> makeMultiWriteSend();   // Multi-W
std::unique_ptr<SendProtocol> makeOfferReadSend();    // P-RRS

}  // namespace ibdt::messaging
