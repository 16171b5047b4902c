// transport/messaging/control_sender.h — messages out to each peer: its
// control queue (control_queue.h) flushed within the credits CreditFlow
// grants (credit_flow.h), the send slots and queue depth, and what the
// eager-family send protocols ask of the core (EagerServices): posting a
// message written in place or through a send slot, or gathered from user
// blocks behind a header in a send slot.
//
// A peer has eagerCredits receive buffers for us plus kReserveSlots that
// only credit-only messages use. Every message but those consumes a credit;
// the receiver reports reposted buffers in the next header it sends us, or
// in a credit-only message once half of them are owed (those owed since
// the current progress call began wait for the next call, unless they are
// all the peer has: CreditFlow::creditMessageDue). Since a credit-only
// message is sent at most once per eagerCredits/2 credit-consuming arrivals,
// and those need credits from the previous one, at most two are in flight
// (under IBDT_MSG_EAGER_POOL the batch is half the credits the peer knows
// of, grants not yet sent excluded, so the same holds: CreditFlow::creditBatch).
#pragma once

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "transport/messaging/connections.h"
#include "transport/messaging/context_limits.h"
#include "transport/messaging/credit_flow.h"
#include "transport/messaging/eager_services.h"
#include "transport/messaging/peer.h"
#include "transport/messaging/peer_table.h"
#include "transport/messaging/protocol_select.h"
#include "transport/messaging/protocol_services.h"
#include "transport/messaging/send_slots.h"
#include "transport/messaging/type_cache.h"
#include "transport/messaging/wire.h"

namespace ibdt::messaging {

class ControlSender final : public EagerServices {
 public:
  struct Parts {  // the core's objects a send works with
    PeerTable& peers;
    SendSlots& slots;
    CreditFlow& credits;
    const Connections& connections;
    TypeCache& types;
    const ProtocolSelector& selector;
    ProtocolServices& registrar;  // registers user buffers (registerUser)
    const ProviderLimits& limits;
  };
  ControlSender(Parts parts, const fabric::Domain& domain) : parts_(parts), domain_(domain) {}

  void setRank(int rank) { rank_ = rank; }
  // Posts what waits for `peer` while its link is up and credits, send
  // slots and send queue allow.
  Status flush(Peer& peer);
  // Whether one more message to `peer` can be posted now (its link is up,
  // a credit, a send slot and a send-queue entry are free).
  bool canPostNow(const Peer& peer) const;
  // A credit-only message once the peer is owed enough credits (carrying
  // a kReclaim if one is due); the credits it asked back (kGiveBack) once
  // nothing else waits for it.
  Status sendCreditIfOwed(Peer& peer);
  Status giveBackIfAsked(Peer& peer);
  // A header-only message of `kind` into the peer's reserve buffers; false
  // when no send slot is free (try again later).
  Result<bool> sendReserved(Peer& peer, wire::Kind kind);

  // EagerServices
  int selfRank() const override { return rank_; }
  TypeCache& types() override { return parts_.types; }
  const ProtocolSelector& selector() const override { return parts_.selector; }
  wire::Header headerTo(int rank, wire::Kind kind) const override;
  void messageSent(int rank, bool spendsCredit) override { parts_.credits.sent(rank, spendsCredit); }
  Result<bool> sendWritten(int rank, uint32_t length, WriteFunction write, void* context, Status& writeError) override;
  Result<SendSlot> takeSendSlot() override { return parts_.slots.take(); }
  void returnSendSlot(uint32_t index) override { parts_.slots.giveBack(index); }
  SgeOut gatherScratch() override;
  Status postGathered(int rank, const SendSlot& slot, std::span<const fabric::Sge> sges,
                      std::shared_ptr<PipelinedSend> reader) override;
  Result<UserRegistration> registerUser(const Operation& op, int64_t bytes, uint32_t access, bool single) override {
    return parts_.registrar.registerUser(op, bytes, access, single);
  }

 private:
  Peer& peer(int rank) { return parts_.peers.peer(rank); }
  // Posts a signaled SEND of `sges` (SGE 0 in send slot `slot`); the slot
  // goes back if the post fails.
  Status postSlot(Peer& peer, uint32_t slot, std::span<const fabric::Sge> sges, std::string_view what);

  Parts parts_;
  const fabric::Domain& domain_;
  int rank_ = 0;
  bool inPlaceSends_ = true;  // until the provider says it has no postSendPacked
  struct {  // a gathered message's entries, reused rather than reallocated
    std::vector<fabric::Sge> sges;
    std::vector<datatype::Iovec> iovecs;
  } scratch_;
};

}  // namespace ibdt::messaging
