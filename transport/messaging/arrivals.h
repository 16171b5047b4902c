// transport/messaging/arrivals.h — what a peer wrote into one of our
// receive slots. Each control message is parsed (a message too short or
// lying about its size is its sender's fault) and handed to its protocol:
// eager and pipelined messages and RTSs are matched against the posted
// receives or kept as unexpected (eager_arrivals.cc), CTS, FIN and RELEASE
// go to the RendezvousSender, PACKED to the RendezvousReceiver, the credits
// in every header to CreditFlow.
#pragma once

#include <memory>
#include <span>

#include "transport/messaging/credit_flow.h"
#include "transport/messaging/matching.h"
#include "transport/messaging/peer.h"
#include "transport/messaging/rendezvous_receiver.h"
#include "transport/messaging/rendezvous_sender.h"
#include "transport/messaging/type_cache.h"
#include "transport/messaging/wire.h"

namespace ibdt::messaging {

class Arrivals {
 public:
  // What an arrival needs of the core.
  class Host {
   public:
    virtual Peer& peerAt(int rank) = 0;
    virtual void failPeer(int rank, Status status) = 0;
    // The peer's CLOSE: it promises that nothing more follows (context_close.cc).
    virtual Status handleClose(Peer& peer) = 0;

   protected:
    ~Host() = default;
  };

  struct Parts {  // the objects arrivals are handed to
    Matching& matching;
    TypeCache& types;
    CreditFlow& credits;
    RendezvousSender& sender;
    RendezvousReceiver& receiver;
  };

  Arrivals(Host& host, Parts parts, const Options& options) : host_(host), parts_(parts), options_(options) {}

  // One control message from `peer`; a Status is that peer's failure.
  Status dispatch(Peer& peer, std::span<const uint8_t> message);
  // A receive posted for the unexpected pipelined message still arriving
  // takes it over: its remaining fragments go straight to `op`.
  void adoptInbound(std::shared_ptr<Operation> op, Unexpected& unexpected);
  // The peer failed: the pipelined message arriving from it is dropped.
  void dropInbound(Peer& peer);

 private:
  Status dispatchEager(Peer& peer, std::span<const uint8_t> message, size_t offset);
  Status dispatchPipelined(Peer& peer, std::span<const uint8_t> message, size_t offset);
  Status dispatchRts(Peer& peer, std::span<const uint8_t> message, size_t offset);
  Status dispatchCts(Peer& peer, std::span<const uint8_t> message, size_t offset);
  // eager_arrivals.cc
  void handleEager(Peer& peer, const wire::Envelope& envelope, std::span<const uint8_t> payload);
  Status handlePipelined(Peer& peer, const wire::Envelope& envelope, std::span<const uint8_t> payload);
  Status handleFragment(Peer& peer, const wire::Fragment& fragment, std::span<const uint8_t> payload);
  // An RTS matched to a posted receive goes to the receiver, else waits.
  void handleRts(Peer& peer, const wire::Envelope& envelope, const wire::Rts& rts);

  Host& host_;
  Parts parts_;
  const Options& options_;
};

}  // namespace ibdt::messaging
