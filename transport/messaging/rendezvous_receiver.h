// transport/messaging/rendezvous_receiver.h — the receiver's side of every
// rendezvous: a matched RTS gets its reply (CTS), an unpack buffer or the
// zero-copy receive (paper Section 5.2, third step; recv_protocol.h); then
// each segment is unpacked as its immediate arrives, or, for P-RRS, the
// sender's packed message is READ (remote_read.h) and a Fin sent back.
#pragma once

#include <deque>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "transport/messaging/protocol_select.h"
#include "transport/messaging/rendezvous_services.h"
#include "transport/messaging/rendezvous_transfers.h"
#include "transport/messaging/transfers.h"

namespace ibdt::messaging {

class RendezvousReceiver {
 public:
  RendezvousReceiver(RendezvousServices& services, const ProtocolSelector& selector, TypeCache& types, TransferIds& ids)
      : services_(services), selector_(selector), types_(types), ids_(ids) {}

  // The RTS from `source` matched the receive `op`: reply to it.
  Status accept(std::shared_ptr<Operation> op, int source, const wire::Envelope& envelope, const wire::Rts& rts);
  // `rank` wrote with immediate `transferId`, or offers its packed data to read.
  Status onWriteImm(int rank, uint32_t transferId);
  Status onPacked(int rank, const wire::Packed& packed);
  // A READ of transfer `transferId` completed.
  Status onReadCompleted(uint32_t transferId);
  // Posts what the send queue allows of the reads from `rank`.
  Status advance(int rank);
  bool hasWork(int rank) const {
    return static_cast<size_t>(rank) < active_.size() && !active_[static_cast<size_t>(rank)].empty();
  }
  // Whether a transfer with `rank` is still going.
  bool involves(int rank) const;
  // `rank` said "nothing more": an error when a transfer from it is unfinished.
  Status checkPeerClosed(int rank) const;
  // Completes every transfer with `rank` with `failure`.
  void failPeer(int rank, const Status& failure);

 private:
  Status reply(std::shared_ptr<Operation> op, int source, const wire::Envelope& envelope, const wire::Rts& rts,
               CtsDraft& draft);
  Result<std::unique_ptr<RecvProtocol>> startReceive(const Operation& op, bool unpack, CtsDraft& draft);
  void queueCts(int rank, const wire::Cts& cts, std::span<const uint8_t> layout);
  void finish(uint32_t transferId);

  RendezvousServices& services_;
  const ProtocolSelector& selector_;
  TypeCache& types_;
  TransferIds& ids_;
  TransfersById<RecvTransfer> transfers_;
  std::vector<std::deque<uint32_t>> active_;  // per rank: P-RRS receives with reads left to post
};

}  // namespace ibdt::messaging
