// transport/messaging/context_impl.h — the core behind a messaging Context:
// post and complete, progress, completion dispatch and failing a peer. The
// rest has owners: the peers and their endpoints PeerTable (peer_table.h),
// each peer's link, queue and caches Peer (peer.h), matching Matching
// (matching.h), credits CreditFlow, links Connections, the send buffers
// SendSlots, and every protocol is an object of its own.
//
// Data flow: isend asks ProtocolSelector (protocol_select.h) for its path
// and queues an EagerSend, a PipelinedSend or an RTS on its peer's control
// queue. progress() polls the two completion queues: what a peer wrote into
// a receive slot goes to Arrivals (arrivals.h), which hands it to the eager,
// pipelined and rendezvous code; each send completion goes to the object
// that posted it. For each peer with work it then flushes the control
// queue within its credits once its link is up (ControlSender,
// control_sender.h) and advances the data phase of every rendezvous, which
// RendezvousSender and RendezvousReceiver own (rendezvous_sender.h,
// rendezvous_receiver.h) through CoreServices (core_services.h), each
// scheme's work a protocol object's (send_protocol.h, recv_protocol.h).
#pragma once

#include <algorithm>
#include <array>
#include <deque>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "base/backoff.h"
#include "ibdt/messaging.h"
#include "transport/fabric/mesh.h"
#include "transport/memory/buffer_pool.h"
#include "transport/memory/registration_cache.h"
#include "transport/messaging/active_peers.h"
#include "transport/messaging/arrivals.h"
#include "transport/messaging/connections.h"
#include "transport/messaging/context_limits.h"
#include "transport/messaging/control_sender.h"
#include "transport/messaging/core_services.h"
#include "transport/messaging/operation.h"
#include "transport/messaging/peer.h"
#include "transport/messaging/peer_table.h"
#include "transport/messaging/protocol_select.h"
#include "transport/messaging/receive_pool.h"
#include "transport/messaging/rendezvous_receiver.h"
#include "transport/messaging/rendezvous_sender.h"
#include "transport/messaging/rendezvous_services.h"
#include "transport/messaging/credit_flow.h"
#include "transport/messaging/eager_receive.h"
#include "transport/messaging/eager_services.h"
#include "transport/messaging/endpoint_ranks.h"
#include "transport/messaging/match_list.h"
#include "transport/messaging/matching.h"
#include "transport/messaging/one_sided.h"
#include "transport/messaging/scheme_select.h"
#include "transport/messaging/send_slots.h"
#include "transport/messaging/staging.h"
#include "transport/messaging/tuning.h"
#include "transport/messaging/type_cache.h"
#include "transport/messaging/user_registration.h"
#include "transport/messaging/wire.h"

namespace ibdt::messaging {

class ContextImpl : private Arrivals::Host,
                    private CreditFlow::Host,
                    private Connections::Host,
                    private OneSided::Host {
 public:
  ContextImpl(fabric::Domain& domain, const Options& options) : domain_(domain), options_(options) {}
  ~ContextImpl() override;
  Status init(const Bootstrap& bootstrap);

  // An operation is prepared (arguments checked, segment taken from the
  // type cache) and then posted; isend/irecv do both, a persistent request
  // prepares once and posts at every start (context.cc).
  Result<std::shared_ptr<Operation>> prepareSend(const void* buf, int64_t count, const datatype::Datatype& type,
                                                 int dest, int tag, uint32_t communicator);
  Result<std::shared_ptr<Operation>> prepareRecv(void* buf, int64_t count, const datatype::Datatype& type, int source,
                                                 int tag, uint32_t communicator);
  Status postSend(const std::shared_ptr<Operation>& op);
  Status postRecv(const std::shared_ptr<Operation>& op);
  // Readies a completed persistent operation for its next run: the same one
  // when nothing else holds it (no allocation), else a fresh copy.
  Result<std::shared_ptr<Operation>> rearm(std::shared_ptr<Operation> op);
  Status cancel(Operation& op);
  Status progress();
  // Drives progress until `op` is done: kTimeout (naming `what`) once
  // `deadline` passes first, a progress error as is. Pauses (Backoff) while
  // nothing happens, so a waiting rank yields its core.
  Status progressUntilDone(const Operation& op, Deadline deadline, std::string_view what);
  // context_close.cc
  Status close(Deadline deadline);

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool closed() const { return closed_; }
  // Ok, or the failure of rank `rank` (Context::peerStatus).
  Status peerStatus(int rank) const { return peer(rank).failed() ? peer(rank).failure() : Status::ok(); }
  uint32_t spins() const { return spins_; }    // Backoff budget of this Context's waits
  uint64_t events() const { return events_; }  // completions handled so far (drives backoff)
  double packBelow() const { return selector_.packBelow(); }
  double unpackBelow() const { return selector_.unpackBelow(); }
  bool exchangeSingleCopy(uint32_t communicator, int64_t bytes) const {
    return selector_.exchangeSingleCopy(communicator, bytes);
  }
  int64_t singleCopyReadMin() const { return selector_.singleCopyReadMin(); }
  const std::string& tuningNote() const { return selector_.tuningNote(); }
  const Tuning* tuning() const { return selector_.tuning(); }
  // The counters, with the figures kept elsewhere brought up to date.
  const Counters& counters() {
    counters_.poolGrowths = services_.poolGrowths();
    counters_.unexpectedBytes = matching_.heldBytes();
    counters_.peersVisited = activePeers_.visits();
    return counters_;
  }
  void complete(Operation& op, Status status) { completeOperation(op, std::move(status)); }
  // Persistent one-sided puts (one_sided.h), set up on first use.
  OneSided& oneSided() {
    if (!oneSided_) oneSided_ = std::make_unique<OneSided>(*this, static_cast<OneSided::Host&>(*this));
    return *oneSided_;
  }

 private:
  int rank_ = 0;
  int size_ = 1;
  fabric::Domain& domain_;
  Options options_;
  uint32_t spins_ = Backoff::kSpins;  // Backoff budget of this Context's waits
  Counters counters_;
  CreditFlow credits_{counters_};
  Connections connections_{*this, counters_};
  // Which protocol each message takes (protocol_select.h).
  ProtocolSelector selector_{options_};

  // OneSided::Host
  Result<memory::RegionRef> acquireRegion(const void* buf, size_t bytes, uint32_t access) override {
    return services_.cache().acquire(buf, bytes, access);
  }
  const Status& peerFailure(int rank) const override { return peer(rank).failure(); }
  Result<bool> postAllOrNone(int rank, std::vector<fabric::SendRequest>& requests) override;
  uint64_t maxWriteBytes() const override { return services_.maxWriteBytes(); }
  uint32_t sendQueueDepth() const override { return services_.sendQueueDepth(); }
  // context_setup.cc: the endpoints (links in connections.h)
  Status connectEager(const Bootstrap& bootstrap);
  Status preparePeer(Peer& peer, fabric::Endpoint& endpoint);
  // Sends queued control messages once the link is up; starts it if idle (context.cc).
  Status connectAndFlush(Peer& peer);
  // context_close.cc
  bool closeRound();
  bool quietToward(const Peer& peer) const;
  Status sendClose(Peer& peer);
  Status handleClose(Peer& peer) override;  // Arrivals::Host
  // context_setup.cc: the steps of init after those of context_limits.h, in order
  Status measureCosts();  // the cost model and the tuning file
  Status connectSelf();                             // credits, links, and the endpoint pair to ourselves
  Status createBuffers();                           // send slots, buffer pool, registration cache
  Status connectPeers(const Bootstrap& bootstrap);  // eagerly, or start listening (IBDT_MSG_CONNECT)
  // context_impl.cc
  Status handleReceive(const fabric::Completion& completion);
  // The message in the receive buffer `completion` names (a peer's slot, or
  // the pool's under a shared receive queue), at most a slot long.
  // Hands a received message to the protocols; what it did with its buffer.
  CreditFlow::Use deliver(Peer& peer, const fabric::Completion& completion);
  std::span<const uint8_t> receivedMessage(const Peer& sender, const fabric::Completion& completion) const;
  Status handleSendCompletion(const fabric::Completion& completion);
  // Arrivals::Host (failPeer serves all three hosts)
  Peer& peerAt(int rank) override { return peer(rank); }
  // CreditFlow::Host
  Status repostBuffer(int sender, uint64_t buffer) override;
  bool peerFailed(int rank) const override { return peer(rank).failed(); }
  void failPeer(int rank, Status status) override { failPeer(peer(rank), std::move(status)); }
  bool mayWithhold(int rank) const override { return matching_.overBudget() && !matching_.receivePostedFrom(rank); }
  uint64_t grantableBuffers() const override;
  Result<bool> grantBuffer(int rank) override;
  void keepBuffer(uint64_t buffer) override { receivePool_.giveBack(ReceivePool::slotOf(buffer)); }
  void wake(int rank) override { activePeers_.mark(rank); }
  // IBDT_MSG_EAGER_POOL: the pool's shape and posting a peer's share (context_setup.cc).
  Status enableEagerPool(uint32_t creditCeiling);
  Status openPooledSlots(Peer& peer);
  // Connections::Host (peerFailed and failPeer serve both)
  Result<fabric::Endpoint*> endpointTo(int rank) override { return peers_.endpointTo(rank); }
  Status linkReady(int rank) override { return control_.flush(peer(rank)); }
  void failPeer(Peer& peer, Status status);
  size_t slotSize() const { return eagerSlotSize(options_); }
  Peer& peer(int rank) { return peers_.peer(rank); }
  const Peer& peer(int rank) const { return peers_.peer(rank); }

  PeerTable peers_{domain_};  // the peers, their endpoints and the completion queues
  ReceivePool receivePool_;   // eager receive buffers under a shared receive queue or IBDT_MSG_EAGER_POOL (else each peer's own)
  EagerPoolShape eagerPool_;      // IBDT_MSG_EAGER_POOL (ceiling 0: off)
  uint32_t endpointsOpened_ = 0;  // IBDT_MSG_EAGER_POOL: shares posted (the others' stay reserved)
  ActivePeers activePeers_;  // the peers progress() visits
  bool peerHasWork(const Peer& peer) const {
    return !peer.control().empty() || sender_.hasWork(peer.rank()) || receiver_.hasWork(peer.rank()) ||
           credits_.due(peer.rank()) || credits_.giveBackAsked(peer.rank());
  }
  SendSlots sendSlots_;
  // Staging, registration and the rest the rendezvous objects ask for (core_services.h).
  CoreServices services_{{peers_, credits_, activePeers_, counters_, limits_, options_}, domain_};
  TypeCache types_;
  Matching matching_{options_, counters_};  // posted receives, unexpected messages and their budget
  TransferIds transferIds_;
  RendezvousSender sender_{services_, selector_, options_, counters_, transferIds_};
  RendezvousReceiver receiver_{services_, selector_, types_, transferIds_};
  Arrivals arrivals_{*this, {matching_, types_, credits_, sender_, receiver_}, options_};
  ProviderLimits limits_;
  ControlSender control_{{peers_, sendSlots_, credits_, connections_, types_, selector_, services_, limits_}, domain_};
  uint64_t events_ = 0;  // bumped by every completion handled (drives backoff)
  // What progress() polls into: a member, as a local array would be zeroed
  // (1 KiB) on every call, most of a poll's cost when nothing arrived.
  std::array<fabric::Completion, 32> polled_;
  bool closed_ = false;
  std::unique_ptr<OneSided> oneSided_;  // last: goes before the cache its channels hold regions of
};

}  // namespace ibdt::messaging
