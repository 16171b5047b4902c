// transport/fabric/verbs/verbs_endpoint.h — an RC queue pair as an Endpoint.
//
// Created in INIT (receives may be posted before connect()), moved to RTR and
// RTS by connect() from the peer's address blob. Send requests are tracked in
// a ring indexed by sequence number: a completion retires every request up
// to it, and unsignalled requests are signalled by the provider every half
// ring so that the send queue always drains (those completions are not
// returned to the caller). Memory-window binds and invalidations
// (verbs_memory_window.h) go through the same ring as provider-internal
// requests, in a reserve beyond the caller's depth.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "ibdt/fabric.h"
#include "transport/fabric/verbs/verbs_address.h"
#include "transport/fabric/verbs/verbs_device.h"

namespace ibdt::fabric::verbs {

class VerbsCompletionQueue;
class VerbsMemoryWindow;
class VerbsReceiveQueue;

// What the domain hands every endpoint: device limits and connection knobs.
struct EndpointSettings {
  const SelectedPort* port = nullptr;
  ibv_pd* pd = nullptr;
  uint32_t maxSendSge = 1;
  uint32_t maxReadSge = 1;
  uint32_t maxRecvSge = 1;
  uint32_t maxInline = 0;
  uint32_t maxSendQueueDepth = 1;
  uint32_t maxRecvQueueDepth = 1;
  uint64_t maxMessageSize = 0;
  uint8_t readsInFlight = 1;   // max_rd_atomic and max_dest_rd_atomic
  uint8_t ackTimeout = 14;     // 4.096 us * 2^timeout
  uint8_t retryCount = 6;
  uint8_t rnrRetry = 7;        // 7: retry forever
  bool sharedReceiveQueue = false;  // IBDT_VERBS_SRQ=1: every receive CQ gets an SRQ at its first endpoint
  uint32_t maxSharedQueueDepth = 0;  // max_srq_wr
  uint32_t maxSharedSge = 0;         // min(max_sge, max_srq_sge)
  // Send-queue entries kept beyond the caller's depth for the provider's
  // own requests (memory-window binds and invalidations); 0 without windows.
  uint32_t internalReserve = 0;
};

class VerbsEndpoint final : public Endpoint {
 public:
  static Result<std::unique_ptr<VerbsEndpoint>> create(const EndpointSettings& settings, VerbsCompletionQueue& sendCq,
                                                       VerbsCompletionQueue& recvCq, const EndpointOptions& options,
                                                       uint16_t epoch, uint32_t psn);
  ~VerbsEndpoint() override;

  std::vector<uint8_t> address() const override;
  Status connect(std::span<const uint8_t> peerAddress) override;
  Status postSend(const SendRequest& first, const SendRequest** badRequest) override;
  Status postRecv(const RecvRequest& first, const RecvRequest** badRequest) override;
  EndpointState state() const override;
  uint32_t id() const override { return qp_->qp_num; }

  // For the completion queue.
  uint16_t epoch() const { return epoch_; }
  VerbsReceiveQueue& receiveQueue() { return *receiveQueue_; }
  bool completeSend(const ibv_wc& wc, uint64_t sequence, Completion& out);
  void noteFailure(const ibv_wc& wc, Opcode opcode);
  void noteFailure(const ibv_wc& wc, const char* what);
  // True while requests posted here may still produce entries on `cq`.
  bool awaitsCompletionsOn(const VerbsCompletionQueue& cq) const;

  // A provider-internal request (signalled; its completion is never
  // returned, a failure moves the endpoint to the error state). `what`
  // names it in logs. Returns its sequence number.
  Result<uint64_t> postInternal(ibv_send_wr& wr, const char* what);
  // Whether internal request `sequence` was carried out without error,
  // polling the send CQ (entries stay queued for poll()) until `deadline`.
  bool awaitInternal(uint64_t sequence, Deadline deadline);
  // Windows bound on this QP, revoked before it is destroyed.
  void attachWindow(VerbsMemoryWindow* window) { windows_.insert(window); }
  void detachWindow(VerbsMemoryWindow* window) { windows_.erase(window); }

 private:
  struct SendSlot {
    uint64_t userId = 0;
    uint32_t bytes = 0;
    Opcode opcode = Opcode::kSend;
    bool userSignaled = false;
    const char* internal = nullptr;  // a provider-internal request: what it is
  };

  VerbsEndpoint(const EndpointSettings& settings, VerbsCompletionQueue& sendCq, VerbsCompletionQueue& recvCq,
                uint16_t epoch, uint32_t psn);
  Status moveToInit();
  // Flushes what is outstanding and retires it, so no entry of this QP is
  // left in a CQ (their reservations would otherwise be over-committed).
  void drainBeforeDestroy();
  Status validate(const SendRequest& request, uint64_t& bytes) const;
  const std::string& device() const;

  EndpointSettings settings_;
  VerbsCompletionQueue& sendCq_;
  VerbsCompletionQueue& recvCq_;
  ibv_qp* qp_ = nullptr;
  std::unique_ptr<VerbsReceiveQueue> ownReceiveQueue_;
  VerbsReceiveQueue* receiveQueue_ = nullptr;
  uint16_t epoch_;
  uint32_t psn_;
  uint32_t maxSendSge_ = 0;
  uint32_t maxInline_ = 0;
  std::vector<SendSlot> sendRing_;
  size_t userDepth_ = 0;  // ring entries the caller's requests may take
  uint64_t internalOutstanding_ = 0;  // provider-internal requests not yet retired
  uint64_t sendHead_ = 0;  // sequence number of the next request
  uint64_t sendTail_ = 0;  // oldest request not yet retired
  uint32_t unsignaledRun_ = 0;
  uint32_t signalInterval_ = 1;
  std::vector<ibv_send_wr> scratch_;
  std::vector<const SendRequest*> scratchRequests_;
  mutable EndpointState state_ = EndpointState::kCreated;
  bool failureLogged_ = false;
  std::unordered_set<VerbsMemoryWindow*> windows_;
};

}  // namespace ibdt::fabric::verbs
