// transport/messaging/context_impl.h — the core behind a messaging Context:
// peers, completion handling, send slots, post and complete. Matching is
// Matching's (matching.h), each peer's outgoing queue ControlQueue's
// (control_queue.h), and every protocol an object of its own.
//
// Data flow: isend asks ProtocolSelector (protocol_select.h) for its path
// and queues an EagerSend, a PipelinedSend or an RTS on its peer's control
// queue;
// progress() polls the two completion queues, dispatches control messages
// (control_dispatch.cc) to the eager, pipelined and rendezvous code,
// flushes each peer's control queue within its credits (CreditFlow) once
// its link is up (Connections) and advances the data phase of every
// rendezvous, which the RendezvousSender and RendezvousReceiver own
// (rendezvous_sender.h, rendezvous_receiver.h) through the core's
// RendezvousServices, each scheme's work a protocol object's
// (send_protocol.h, recv_protocol.h).
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
#include "transport/messaging/connections.h"
#include "transport/messaging/operation.h"
#include "transport/messaging/peer.h"
#include "transport/messaging/protocol_select.h"
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
#include "transport/messaging/staging.h"
#include "transport/messaging/tuning.h"
#include "transport/messaging/type_cache.h"
#include "transport/messaging/user_registration.h"
#include "transport/messaging/wire.h"

namespace ibdt::messaging {

class ContextImpl : private CreditFlow::Host,
                    private Connections::Host,
                    private RendezvousServices,
                    private EagerServices,
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
  // context_close.cc
  Status close(Deadline deadline);

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool closed() const { return closed_; }
  uint32_t spins() const { return spins_; }    // Backoff budget of this Context's waits
  uint64_t events() const { return events_; }  // completions handled so far (drives backoff)
  double packBelow() const { return selector_.packBelow(); }
  double unpackBelow() const { return selector_.unpackBelow(); }
  const std::string& tuningNote() const { return selector_.tuningNote(); }
  const Tuning* tuning() const { return selector_.tuning(); }
  // The counters, with the figures kept elsewhere brought up to date.
  const Counters& counters() {
    counters_.poolGrowths = pool_->counters().growths;
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

  // eager_arrivals.cc: eager and pipelined messages arriving (eager_receive.h, pipelined_inbound.h)
  void handleEager(Peer& peer, const wire::Envelope& envelope, std::span<const uint8_t> payload);
  Status handlePipelined(Peer& peer, const wire::Envelope& envelope, std::span<const uint8_t> payload);
  Status handleFragment(Peer& peer, const wire::Fragment& fragment, std::span<const uint8_t> payload);
  void adoptInbound(std::shared_ptr<Operation> op, Unexpected& unexpected);
  void dropInbound(Peer& peer);
  // control_flush.cc: each peer's control queue (control_queue.h) out within its credits
  Status flushControl(Peer& peer);
  Status sendCreditIfOwed(Peer& peer);
  // Posts a signaled SEND of `sges` (SGE 0 in send slot `slot`); the slot
  // goes back if the post fails.
  Status postSlot(Peer& peer, uint32_t slot, std::span<const fabric::Sge> sges, std::string_view what);
  // EagerServices
  int selfRank() const override { return rank_; }
  TypeCache& types() override { return types_; }
  const ProtocolSelector& selector() const override { return selector_; }
  uint32_t creditsOwedTo(int rank) const override { return credits_.owedTo(rank); }
  void messageSent(int rank, bool spendsCredit) override { credits_.sent(rank, spendsCredit); }
  Result<bool> sendWritten(int rank, uint32_t length, WriteFunction write, void* context, Status& writeError) override;
  Result<SendSlot> takeSendSlot() override;
  void returnSendSlot(uint32_t index) override { freeSendSlots_.push_back(index); }
  SgeOut gatherScratch() override;
  Status postGathered(int rank, const SendSlot& slot, std::span<const fabric::Sge> sges,
                      std::shared_ptr<PipelinedSend> reader) override;
  // OneSided::Host
  Result<memory::RegionRef> acquireRegion(const void* buf, size_t bytes, uint32_t access) override {
    return cache_->acquire(buf, bytes, access);
  }
  const Status& peerFailure(int rank) const override { return peers_[static_cast<size_t>(rank)].failure; }
  Result<bool> postAllOrNone(int rank, std::vector<fabric::SendRequest>& requests) override;
  uint64_t maxWriteBytes() const override { return maxWrBytes_; }
  uint32_t sendQueueDepth() const override { return sendQueueDepth_; }
  // control_dispatch.cc: an RTS matched to a posted receive goes to the receiver, else waits
  void handleRts(Peer& peer, const wire::Envelope& envelope, const wire::Rts& rts);
  // context_setup.cc: the endpoints (links in connections.h)
  Status connectEager(const Bootstrap& bootstrap);
  Status preparePeer(Peer& peer, fabric::Endpoint& endpoint);
  Result<fabric::Endpoint*> createPeerEndpoint(Peer& peer);
  // Sends queued control messages once the link is up; starts it if idle (context.cc).
  Status connectAndFlush(Peer& peer);
  // context_close.cc
  bool closeRound();
  bool quietToward(const Peer& peer) const;
  Status sendClose(Peer& peer);
  Status handleClose(Peer& peer);
  // context_setup.cc: the steps of init, in order
  Status checkSetup(const Bootstrap& bootstrap) const;
  void chooseSpins(const Bootstrap& bootstrap);
  Status applyEagerBudget();  // eager credits per peer within IBDT_MSG_EAGER_MEMORY
  Status readProviderLimits();  // queue depths, SGEs, message size
  Status measureCosts();        // the cost model and the tuning file
  Status createQueues();
  Status connectSelf();                             // peers_, and the endpoint pair to ourselves
  Status createBuffers();                           // send slots, buffer pool, registration cache
  Status connectPeers(const Bootstrap& bootstrap);  // eagerly, or start listening (IBDT_MSG_CONNECT)
  // context_impl.cc
  Status handleReceive(const fabric::Completion& completion);
  Status handleSendCompletion(const fabric::Completion& completion);
  Status dispatchControl(Peer& peer, std::span<const uint8_t> message);
  Status dispatchEager(Peer& peer, std::span<const uint8_t> message, size_t offset);
  Status dispatchPipelined(Peer& peer, std::span<const uint8_t> message, size_t offset);
  Status dispatchRts(Peer& peer, std::span<const uint8_t> message, size_t offset);
  Status dispatchCts(Peer& peer, std::span<const uint8_t> message, size_t offset);
  Status repostSlot(Peer& peer, uint32_t slot);
  // CreditFlow::Host
  Status repostSlot(int rank, uint32_t slot) override { return repostSlot(peers_[static_cast<size_t>(rank)], slot); }
  bool peerFailed(int rank) const override { return !peers_[static_cast<size_t>(rank)].failure.isOk(); }
  void failPeer(int rank, Status status) override { failPeer(peers_[static_cast<size_t>(rank)], std::move(status)); }
  bool mayWithhold(int rank) const override { return matching_.overBudget() && !matching_.receivePostedFrom(rank); }
  // Connections::Host (peerFailed and failPeer serve both)
  Result<fabric::Endpoint*> endpointTo(int rank) override;
  Status linkReady(int rank) override { return flushControl(peers_[static_cast<size_t>(rank)]); }
  // RendezvousServices (rendezvous_services.cc); registerUser also serves the pipelined sender.
  Result<UserRegistration> registerUser(const Operation& op, int64_t bytes, uint32_t access, bool single) override;
  Result<Staging> pooledBuffer(size_t bytes) override;
  Result<Staging> dedicatedBuffer(size_t bytes) override;
  bool creditFree(int rank) const override { return credits_.available(rank) > 0; }
  void queueControl(int rank, std::vector<uint8_t> bytes) override;
  Result<datatype::Segment> receiverLayout(int rank, const wire::Cts& cts, std::span<const uint8_t> layout) override;
  bool layoutCached(int rank, const datatype::Datatype& type) const override;
  void layoutSent(int rank, const datatype::Datatype& type) override;
  size_t controlCapacity() const override { return slotSize(); }
  uint32_t maxSgePerRequest() const override { return maxSge_; }
  uint32_t sendRoom(int rank) const override {
    return sendQueueDepth_ - std::min(sendQueueDepth_, peers_[static_cast<size_t>(rank)].sendOutstanding);
  }
  bool readRoom(int rank) const override;
  Status postWrites(int rank, std::vector<fabric::SendRequest>& requests) override {
    return post(peers_[static_cast<size_t>(rank)], requests);
  }
  Status postRead(int rank, const fabric::SendRequest& request) override;
  void spendCredit(int rank) override { credits_.spend(rank); }
  void wake(int rank) override { activePeers_.mark(rank); }
  void failPeer(Peer& peer, Status status);
  size_t slotSize() const { return sizeof(wire::Header) + sizeof(wire::Envelope) + options_.eagerLimit; }
  Status post(Peer& peer, std::vector<fabric::SendRequest>& requests);

  std::unique_ptr<fabric::CompletionQueue> sendQueue_;
  std::unique_ptr<fabric::CompletionQueue> recvQueue_;
  std::vector<std::unique_ptr<fabric::Endpoint>> endpoints_;
  EndpointRanks endpointRank_;
  std::vector<Peer> peers_;
  ActivePeers activePeers_;  // the peers progress() visits
  bool peerHasWork(const Peer& peer) const {
    return !peer.control.empty() || sender_.hasWork(peer.rank) || receiver_.hasWork(peer.rank) ||
           credits_.due(peer.rank);
  }
  std::unique_ptr<fabric::MemoryRegion> sendSlots_;
  std::vector<uint32_t> freeSendSlots_;
  std::vector<std::shared_ptr<PipelinedSend>> slotOwner_;  // pipelined sends gathering from user blocks
  std::unique_ptr<memory::BufferPool> pool_;
  std::unique_ptr<memory::RegistrationCache> cache_;
  memory::GroupPlanOptions groupPlan_;
  TypeCache types_;
  Matching matching_{options_, counters_};  // posted receives, unexpected messages and their budget
  TransferIds transferIds_;
  RendezvousSender sender_{*this, selector_, options_, counters_, transferIds_};
  RendezvousReceiver receiver_{*this, selector_, types_, transferIds_};
  uint32_t sendQueueDepth_ = 0;
  bool inPlaceSends_ = true;  // until the provider says it has no postSendPacked
  uint32_t maxSge_ = 1;
  uint64_t maxWrBytes_ = 0;
  uint64_t events_ = 0;  // bumped by every completion handled (drives backoff)
  // What progress() polls into: a member, as a local array would be zeroed
  // (1 KiB) on every call, most of a poll's cost when nothing arrived.
  std::array<fabric::Completion, 32> polled_;
  struct PostScratch {  // gathered fragments' lists, reused rather than reallocated
    std::vector<fabric::SendRequest> requests;
    std::vector<fabric::Sge> sges;
    std::vector<datatype::Iovec> iovecs;
  } scratch_;
  fabric::EndpointOptions endpointOptions_;
  uint32_t recvDepth_ = 0;
  bool closed_ = false;
  std::unique_ptr<OneSided> oneSided_;  // last: goes before the cache its channels hold regions of
};

}  // namespace ibdt::messaging
