// transport/messaging/rendezvous_sender.h — the sender's side of every
// rendezvous: the RTS with the datatype statistics, the final scheme by
// Table 1 once the reply (CTS) arrives, then the data phase, a walk over
// the packed byte stream [0, bytes) whose writes the scheme's protocol
// object describes (send_protocol.h). Writes go out as chained lists (or
// one by one with listPost off) within the send queue; every immediate
// spends one of the peer's credits. P-RRS posts no writes: it waits for
// the receiver's Fin.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "transport/messaging/protocol_select.h"
#include "transport/messaging/rendezvous_services.h"
#include "transport/messaging/rendezvous_transfers.h"
#include "transport/messaging/transfers.h"

namespace ibdt::messaging {

class RendezvousSender {
 public:
  RendezvousSender(RendezvousServices& services, const ProtocolSelector& selector, const Options& options,
                   Counters& counters, TransferIds& ids)
      : services_(services), selector_(selector), options_(options), counters_(counters), ids_(ids) {}

  // Starts the rendezvous of `op` (its statistics known): the RTS to queue.
  Result<std::vector<uint8_t>> start(std::shared_ptr<Operation> op);
  // Control messages from `rank` about one of our transfers.
  Status onCts(int rank, const wire::Cts& cts, std::span<const uint8_t> layout);
  Status onRelease(int rank, const wire::Release& release);
  Status onFin(int rank, const wire::Fin& fin);
  // A write of transfer `transferId` completed.
  Status onWriteCompleted(uint32_t transferId);
  // Posts what the send queue and the credits allow of the writes toward `rank`.
  Status advance(int rank);
  bool hasWork(int rank) const {
    return static_cast<size_t>(rank) < active_.size() && !active_[static_cast<size_t>(rank)].empty();
  }
  // Whether a transfer with `rank` is still going.
  bool involves(int rank) const;
  // `rank` said "nothing more": an error when it still owes us part of a transfer.
  Status checkPeerClosed(int rank) const;
  // Completes every transfer with `rank` with `failure`.
  void failPeer(int rank, const Status& failure);

 private:
  Result<std::vector<uint8_t>> buildRts(const SendTransfer& transfer) const;
  Status startData(int rank, SendTransfer& transfer, std::span<const uint8_t> layout);
  std::optional<WriteSlice> nextSlice(const SendTransfer& transfer) const;
  fabric::SendRequest writeRequest(const SendTransfer& transfer, const WriteSlice& slice,
                                   std::span<fabric::Sge> sges) const;
  Status advanceTransfer(int rank, SendTransfer& transfer);
  void finish(uint32_t transferId);

  RendezvousServices& services_;
  const ProtocolSelector& selector_;
  const Options& options_;
  Counters& counters_;
  TransferIds& ids_;
  TransfersById<SendTransfer> transfers_;
  std::vector<std::deque<uint32_t>> active_;  // per rank: transfers with writes left to post
  struct PostScratch {                        // advanceTransfer's lists, reused rather than reallocated
    std::vector<fabric::SendRequest> requests;
    std::vector<fabric::Sge> sges;
    std::vector<datatype::Iovec> iovecs;
  } scratch_;
};

}  // namespace ibdt::messaging
