#include "transport/fabric/verbs/verbs_endpoint.h"

#include <arpa/inet.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <limits>

#include "base/backoff.h"
#include "base/log.h"
#include "transport/fabric/verbs/verbs_completion_queue.h"
#include "transport/fabric/verbs/verbs_memory_window.h"
#include "transport/fabric/verbs/verbs_receive_queue.h"
#include "transport/fabric/verbs/verbs_status.h"
#include "transport/fabric/verbs/verbs_work_id.h"

namespace ibdt::fabric::verbs {
namespace {

constexpr uint32_t kKnownSendFlags = kSignaled | kInline | kFence;
constexpr uint8_t kMinRnrTimer = 12;  // 0.64 ms between receiver-not-ready retries
constexpr uint8_t kHopLimit = 64;

const char* opcodeName(Opcode opcode) {
  switch (opcode) {
    case Opcode::kSend: return "SEND";
    case Opcode::kSendWithImm: return "SEND_WITH_IMM";
    case Opcode::kWrite: return "RDMA WRITE";
    case Opcode::kWriteWithImm: return "RDMA WRITE_WITH_IMM";
    case Opcode::kRead: return "RDMA READ";
    case Opcode::kRecv: return "RECV";
    case Opcode::kRecvWriteWithImm: return "RECV (WRITE_WITH_IMM)";
  }
  return "?";
}

bool isRdma(Opcode opcode) {
  return opcode == Opcode::kWrite || opcode == Opcode::kWriteWithImm || opcode == Opcode::kRead;
}

ibv_wr_opcode toIbvOpcode(Opcode opcode) {
  switch (opcode) {
    case Opcode::kSendWithImm: return IBV_WR_SEND_WITH_IMM;
    case Opcode::kWrite: return IBV_WR_RDMA_WRITE;
    case Opcode::kWriteWithImm: return IBV_WR_RDMA_WRITE_WITH_IMM;
    case Opcode::kRead: return IBV_WR_RDMA_READ;
    default: return IBV_WR_SEND;
  }
}

Status checkLimit(const char* what, uint32_t requested, uint32_t limit, const std::string& device) {
  if (requested <= limit) return Status::ok();
  return makeError(Code::kInvalidArgument, device, ": createEndpoint: ", what, " ", requested,
                   " exceeds the device limit ", limit);
}

}  // namespace

Result<std::unique_ptr<VerbsEndpoint>> VerbsEndpoint::create(const EndpointSettings& settings,
                                                             VerbsCompletionQueue& sendCq,
                                                             VerbsCompletionQueue& recvCq,
                                                             const EndpointOptions& options, uint16_t epoch,
                                                             uint32_t psn) {
  const std::string& device = sendCq.device();
  uint32_t sendSge = options.maxSendSge != 0 ? options.maxSendSge : settings.maxSendSge;
  uint32_t recvSge = options.maxRecvSge != 0 ? options.maxRecvSge : settings.maxRecvSge;
  uint32_t inlineBytes = options.maxInline != 0 ? options.maxInline : settings.maxInline;
  if (options.sendQueueDepth == 0 || options.recvQueueDepth == 0) {
    return makeError(Code::kInvalidArgument, device, ": createEndpoint: queue depths must be at least 1");
  }
  IBDT_RETURN_IF_ERROR(checkLimit("sendQueueDepth", options.sendQueueDepth, settings.maxSendQueueDepth, device));
  IBDT_RETURN_IF_ERROR(checkLimit("recvQueueDepth", options.recvQueueDepth, settings.maxRecvQueueDepth, device));
  IBDT_RETURN_IF_ERROR(checkLimit("maxSendSge", sendSge, settings.maxSendSge, device));
  IBDT_RETURN_IF_ERROR(checkLimit("maxRecvSge", recvSge, settings.maxRecvSge, device));
  IBDT_RETURN_IF_ERROR(checkLimit("maxInline", inlineBytes, settings.maxInline, device));

  std::unique_ptr<VerbsEndpoint> endpoint(new VerbsEndpoint(settings, sendCq, recvCq, epoch, psn));
  ibv_qp_init_attr init{};
  init.send_cq = sendCq.handle();
  init.recv_cq = recvCq.handle();
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 0;
  uint32_t reserve = std::min(settings.internalReserve, settings.maxSendQueueDepth - options.sendQueueDepth);
  init.cap.max_send_wr = options.sendQueueDepth + reserve;
  init.cap.max_send_sge = sendSge;
  init.cap.max_inline_data = inlineBytes;
  // An SRQ for every receive CQ (IBDT_VERBS_SRQ=1), or for the CQs a user
  // asked to share one (VerbsDomain::shareReceives).
  const bool shared = settings.sharedReceiveQueue || recvCq.sharedReceiveQueue() != nullptr;
  if (shared) {
    if (recvCq.sharedReceiveQueue() == nullptr) {
      uint32_t depth = std::min(recvCq.freeEntries(), settings.maxRecvQueueDepth);
      IBDT_ASSIGN_OR_RETURN(auto queue,
                            VerbsReceiveQueue::createShared(settings.pd, recvCq, depth, settings.maxSharedSge, device));
      recvCq.setSharedReceiveQueue(std::move(queue));
    }
    init.srq = recvCq.sharedReceiveQueue()->sharedQueue();
  } else {
    init.cap.max_recv_wr = options.recvQueueDepth;
    init.cap.max_recv_sge = recvSge;
  }
  endpoint->qp_ = ibv_create_qp(settings.pd, &init);
  if (endpoint->qp_ == nullptr) {
    return verbsCallError(strCat("ibv_create_qp(RC, ", options.sendQueueDepth, "/", options.recvQueueDepth,
                                 " WRs, ", sendSge, "/", recvSge, " SGEs, ", inlineBytes, " B inline)"),
                          errno, device);
  }
  // The device may grant more than asked; the ring and limits follow what it granted.
  endpoint->maxSendSge_ = sendSge;
  endpoint->maxInline_ = init.cap.max_inline_data;
  endpoint->sendRing_.resize(init.cap.max_send_wr);
  endpoint->userDepth_ = init.cap.max_send_wr - reserve;
  endpoint->scratch_.resize(init.cap.max_send_wr);
  // Signalled at least every half of the caller's depth (internal requests always are).
  endpoint->signalInterval_ = std::max<uint32_t>(1, static_cast<uint32_t>(endpoint->userDepth_ / 2));
  if (shared) {
    endpoint->receiveQueue_ = recvCq.sharedReceiveQueue();
  } else {
    endpoint->ownReceiveQueue_ =
        std::make_unique<VerbsReceiveQueue>(recvCq, init.cap.max_recv_wr, recvSge, epoch, device);
    endpoint->ownReceiveQueue_->setQueuePair(endpoint->qp_);
    endpoint->receiveQueue_ = endpoint->ownReceiveQueue_.get();
  }
  sendCq.attach(endpoint->qp_->qp_num, endpoint.get());
  recvCq.attach(endpoint->qp_->qp_num, endpoint.get());
  IBDT_RETURN_IF_ERROR(endpoint->moveToInit());
  return endpoint;
}

VerbsEndpoint::VerbsEndpoint(const EndpointSettings& settings, VerbsCompletionQueue& sendCq,
                             VerbsCompletionQueue& recvCq, uint16_t epoch, uint32_t psn)
    : settings_(settings), sendCq_(sendCq), recvCq_(recvCq), epoch_(epoch), psn_(psn) {}

VerbsEndpoint::~VerbsEndpoint() {
  if (qp_ == nullptr) return;
  for (VerbsMemoryWindow* window : windows_) window->revokeWithEndpoint();
  windows_.clear();
  drainBeforeDestroy();
  sendCq_.detach(qp_->qp_num);
  recvCq_.detach(qp_->qp_num);
  // Whatever did not flush within the drain's deadline will never be returned.
  sendCq_.release(static_cast<uint32_t>(sendHead_ - sendTail_));
  if (ownReceiveQueue_) ownReceiveQueue_->abandon();
  if (int rc = ibv_destroy_qp(qp_); rc != 0) IBDT_LOG(kWarn, device(), ": ibv_destroy_qp failed: ", std::strerror(rc));
}

bool VerbsEndpoint::awaitsCompletionsOn(const VerbsCompletionQueue& cq) const {
  return (&cq == &sendCq_ && sendHead_ != sendTail_) ||
         (&cq == &recvCq_ && ownReceiveQueue_ && ownReceiveQueue_->outstanding() > 0);
}

void VerbsEndpoint::drainBeforeDestroy() {
  if (!awaitsCompletionsOn(sendCq_) && !awaitsCompletionsOn(recvCq_)) return;
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  if (int rc = ibv_modify_qp(qp_, &attr, IBV_QP_STATE); rc != 0) {
    IBDT_LOG(kWarn, device(), ": ibv_modify_qp(ERR) before destroy failed: ", std::strerror(rc));
    return;
  }
  // Unsignalled requests that already succeeded produce nothing; a signalled
  // marker posted behind them (flushed, as everything posted in ERR) retires
  // them all, like the kernel's ib_drain_sq().
  if (sendHead_ != sendTail_ && sendHead_ - sendTail_ < sendRing_.size() && sendCq_.freeEntries() > 0) {
    sendRing_[sendHead_ % sendRing_.size()] = {0, 0, Opcode::kSend, false};
    ibv_send_wr marker{};
    marker.wr_id = WorkId{WorkKind::kSend, epoch_, sendHead_}.encode();
    marker.opcode = IBV_WR_SEND;
    marker.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(qp_, &marker, &bad) == 0) {
      ++sendHead_;
      sendCq_.reserve(1);
    }
  }
  Deadline deadline = Deadline::after(std::chrono::seconds(2));
  sendCq_.drain(*this, deadline);
  if (&recvCq_ != &sendCq_) recvCq_.drain(*this, deadline);
}

const std::string& VerbsEndpoint::device() const { return sendCq_.device(); }

Status VerbsEndpoint::moveToInit() {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = settings_.port->portNumber;
  attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  int rc = ibv_modify_qp(qp_, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (rc != 0) return verbsCallError("ibv_modify_qp(RESET->INIT)", rc, device());
  return Status::ok();
}

std::vector<uint8_t> VerbsEndpoint::address() const {
  VerbsAddress address;
  address.ethernet = settings_.port->roce;
  address.mtu = static_cast<uint8_t>(settings_.port->attr.active_mtu);
  address.lid = settings_.port->attr.lid;
  address.qpNumber = qp_->qp_num;
  address.psn = psn_;
  std::copy(std::begin(settings_.port->gid.raw), std::end(settings_.port->gid.raw), address.gid.begin());
  return encodeAddress(address);
}

Status VerbsEndpoint::connect(std::span<const uint8_t> peerAddress) {
  if (state_ != EndpointState::kCreated) {
    return makeError(Code::kState, device(), ": connect to ", peerLabel(), ": endpoint is already connected or failed");
  }
  auto decoded = decodeAddress(peerAddress);
  if (!decoded.isOk()) return std::move(decoded).takeStatus().withContext(strCat("connect to ", peerLabel()));
  const VerbsAddress& peer = *decoded;
  const SelectedPort& port = *settings_.port;
  if (peer.ethernet != port.roce) {
    return makeError(Code::kProtocol, device(), ": connect to ", peerLabel(), ": peer is on ",
                     peer.ethernet ? "RoCE" : "InfiniBand", ", this port is ", port.roce ? "RoCE" : "InfiniBand");
  }
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = static_cast<ibv_mtu>(std::min<int>(peer.mtu, port.attr.active_mtu));
  attr.dest_qp_num = peer.qpNumber;
  attr.rq_psn = peer.psn;
  attr.max_dest_rd_atomic = settings_.readsInFlight;
  attr.min_rnr_timer = kMinRnrTimer;
  attr.ah_attr.port_num = port.portNumber;
  if (port.roce) {
    attr.ah_attr.is_global = 1;
    std::copy(peer.gid.begin(), peer.gid.end(), attr.ah_attr.grh.dgid.raw);
    attr.ah_attr.grh.sgid_index = port.gidIndex;
    attr.ah_attr.grh.hop_limit = kHopLimit;
  } else {
    attr.ah_attr.dlid = peer.lid;
  }
  int rc = ibv_modify_qp(qp_, &attr,
                         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc != 0) {
    return verbsCallError(strCat("ibv_modify_qp(INIT->RTR, peer QP ", peer.qpNumber, ")"), rc, device())
        .withContext(strCat("connect to ", peerLabel()));
  }
  attr = ibv_qp_attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.timeout = settings_.ackTimeout;
  attr.retry_cnt = settings_.retryCount;
  attr.rnr_retry = settings_.rnrRetry;
  attr.sq_psn = psn_;
  attr.max_rd_atomic = settings_.readsInFlight;
  rc = ibv_modify_qp(qp_, &attr,
                     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                         IBV_QP_MAX_QP_RD_ATOMIC);
  if (rc != 0) {
    return verbsCallError("ibv_modify_qp(RTR->RTS)", rc, device()).withContext(strCat("connect to ", peerLabel()));
  }
  state_ = EndpointState::kConnected;
  IBDT_LOG(kDebug, device(), ": QP ", qp_->qp_num, " connected to ", peerLabel(), " (QP ", peer.qpNumber, ", mtu ",
           mtuBytes(attr.path_mtu), ")");
  return Status::ok();
}

Status VerbsEndpoint::validate(const SendRequest& request, uint64_t& bytes) const {
  auto invalid = [&](const auto&... why) {
    return makeError(Code::kInvalidArgument, device(), ": postSend (id ", request.id, ", peer ", peerLabel(),
                     "): ", why...);
  };
  switch (request.opcode) {
    case Opcode::kSend:
    case Opcode::kSendWithImm:
    case Opcode::kWrite:
    case Opcode::kWriteWithImm:
    case Opcode::kRead: break;
    default: return invalid(opcodeName(request.opcode), " is not a send-queue opcode");
  }
  if ((request.flags & ~kKnownSendFlags) != 0) return invalid("unknown flags 0x", std::hex, request.flags);
  uint32_t sgeLimit = request.opcode == Opcode::kRead ? std::min(maxSendSge_, settings_.maxReadSge) : maxSendSge_;
  if (request.numSge > sgeLimit) return invalid(request.numSge, " SGEs exceed the limit ", sgeLimit);
  if (request.numSge > 0 && request.sgList == nullptr) return invalid("null sgList with ", request.numSge, " SGEs");
  bytes = 0;
  for (uint32_t i = 0; i < request.numSge; ++i) bytes += request.sgList[i].length;
  if (bytes > settings_.maxMessageSize) return invalid(bytes, " bytes exceed the port's maximum message ", settings_.maxMessageSize);
  if ((request.flags & kInline) != 0) {
    if (request.opcode == Opcode::kRead) return invalid("an RDMA READ cannot be inline");
    if (bytes > maxInline_) return invalid(bytes, " bytes exceed the endpoint's inline limit ", maxInline_);
  }
  if (isRdma(request.opcode) && request.rkey > std::numeric_limits<uint32_t>::max()) {
    return invalid("rkey 0x", std::hex, request.rkey, " does not fit 32 bits");
  }
  return Status::ok();
}

Status VerbsEndpoint::postSend(const SendRequest& first, const SendRequest** badRequest) {
  if (state_ == EndpointState::kCreated) {
    if (badRequest != nullptr) *badRequest = &first;
    return makeError(Code::kState, device(), ": postSend to ", peerLabel(), ": endpoint is not connected");
  }
  // Signalling decision: the caller's, plus one every signalInterval_ requests.
  auto advance = [this](uint32_t& run, bool userSignaled) {
    if (userSignaled || run + 1 >= signalInterval_) {
      run = 0;
      return true;
    }
    ++run;
    return false;
  };
  Status status;
  const SendRequest* stop = nullptr;
  uint64_t outstanding = sendHead_ - sendTail_;
  uint32_t run = unsignaledRun_;
  size_t count = 0;
  scratchRequests_.clear();
  for (const SendRequest* request = &first; request != nullptr; request = request->next) {
    uint64_t bytes = 0;
    status = validate(*request, bytes);
    if (!status.isOk()) {
      stop = request;
      break;
    }
    if (outstanding - internalOutstanding_ + count >= userDepth_ || outstanding + count >= sendRing_.size() ||
        count >= sendCq_.freeEntries()) {
      status = makeError(Code::kAgain, device(), ": postSend to ", peerLabel(), ": ",
                         count >= sendCq_.freeEntries() ? "completion queue has no room" : "send queue full");
      stop = request;
      break;
    }
    uint64_t sequence = sendHead_ + count;
    bool userSignaled = (request->flags & kSignaled) != 0;
    sendRing_[sequence % sendRing_.size()] = {request->id, static_cast<uint32_t>(bytes), request->opcode, userSignaled,
                                              nullptr};
    ibv_send_wr& wr = scratch_[count];
    wr = {};
    wr.wr_id = WorkId{WorkKind::kSend, epoch_, sequence}.encode();
    wr.sg_list = asIbvSge(request->sgList);
    wr.num_sge = static_cast<int>(request->numSge);
    wr.opcode = toIbvOpcode(request->opcode);
    if (advance(run, userSignaled)) wr.send_flags |= IBV_SEND_SIGNALED;
    if ((request->flags & kInline) != 0) wr.send_flags |= IBV_SEND_INLINE;
    if ((request->flags & kFence) != 0) wr.send_flags |= IBV_SEND_FENCE;
    if (request->opcode == Opcode::kSendWithImm || request->opcode == Opcode::kWriteWithImm) {
      wr.imm_data = htonl(request->immData);
    }
    if (isRdma(request->opcode)) {
      wr.wr.rdma.remote_addr = request->remoteAddress;
      wr.wr.rdma.rkey = static_cast<uint32_t>(request->rkey);
    }
    scratchRequests_.push_back(request);
    ++count;
  }
  size_t posted = count;
  if (count > 0) {
    for (size_t i = 0; i + 1 < count; ++i) scratch_[i].next = &scratch_[i + 1];
    ibv_send_wr* badWr = nullptr;
    if (int rc = ibv_post_send(qp_, scratch_.data(), &badWr); rc != 0) {
      posted = badWr != nullptr ? static_cast<size_t>(badWr - scratch_.data()) : 0;
      stop = scratchRequests_[posted];
      status = rc == ENOMEM ? makeError(Code::kAgain, device(), ": ibv_post_send: send queue full")
                            : verbsCallError("ibv_post_send", rc, device()).withContext(strCat("post to ", peerLabel()));
      run = unsignaledRun_;  // replay the signalling decisions of what was posted
      for (size_t i = 0; i < posted; ++i) advance(run, sendRing_[(sendHead_ + i) % sendRing_.size()].userSignaled);
    }
    unsignaledRun_ = run;
    sendHead_ += posted;
    sendCq_.reserve(static_cast<uint32_t>(posted));
  }
  if (badRequest != nullptr) *badRequest = stop;
  return status;
}

Status VerbsEndpoint::postRecv(const RecvRequest& first, const RecvRequest** badRequest) {
  // Receives posted once the QP is known to have failed complete as flushed.
  // Some devices never flush a receive posted in the error state (rdma_rxe on
  // Linux 6.1), so the provider does it for every device.
  if (state_ == EndpointState::kError && ownReceiveQueue_) {
    return ownReceiveQueue_->flush(first, badRequest, peerLabel(), id());
  }
  return receiveQueue_->post(first, badRequest, peerLabel());
}

EndpointState VerbsEndpoint::state() const {
  if (state_ == EndpointState::kConnected) {
    // The device moves the QP to ERR on a failure before its completion is polled.
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    if (ibv_query_qp(qp_, &attr, IBV_QP_STATE, &init) == 0 && attr.qp_state == IBV_QPS_ERR) {
      state_ = EndpointState::kError;
    }
  }
  return state_;
}

bool VerbsEndpoint::completeSend(const ibv_wc& wc, uint64_t sequence, Completion& out) {
  if (sequence < sendTail_ || sequence >= sendHead_) return false;  // stale
  // A completion retires its request and every unsignalled one before it.
  sendCq_.release(static_cast<uint32_t>(sequence - sendTail_ + 1));
  for (uint64_t at = sendTail_; at <= sequence && internalOutstanding_ > 0; ++at) {
    if (sendRing_[at % sendRing_.size()].internal != nullptr) --internalOutstanding_;
  }
  sendTail_ = sequence + 1;
  const SendSlot& slot = sendRing_[sequence % sendRing_.size()];
  bool success = wc.status == IBV_WC_SUCCESS;
  if (slot.internal != nullptr) {  // never the caller's: a failure shows in its later requests
    if (!success) noteFailure(wc, slot.internal);
    return false;
  }
  if (success && !slot.userSignaled) return false;
  out.id = slot.userId;
  out.opcode = slot.opcode;
  out.status = translateWcStatus(wc.status);
  out.byteLength = success ? slot.bytes : 0;
  out.vendorError = wc.vendor_err;
  return true;
}

void VerbsEndpoint::noteFailure(const ibv_wc& wc, Opcode opcode) { noteFailure(wc, opcodeName(opcode)); }

void VerbsEndpoint::noteFailure(const ibv_wc& wc, const char* what) {
  state_ = EndpointState::kError;
  if (failureLogged_ || wc.status == IBV_WC_WR_FLUSH_ERR) return;
  failureLogged_ = true;
  IBDT_LOG(kWarn, device(), ": ", what, " with ", peerLabel(), " (QP ", wc.qp_num,
           ") failed: ", ibv_wc_status_str(wc.status), " (wc status ", static_cast<int>(wc.status),
           ", vendor error 0x", std::hex, wc.vendor_err, "); the endpoint is now in the error state");
}

}  // namespace ibdt::fabric::verbs

namespace ibdt::fabric::verbs {

Result<uint64_t> VerbsEndpoint::postInternal(ibv_send_wr& wr, const char* what) {
  if (state() != EndpointState::kConnected) {
    return makeError(Code::kState, device(), ": ", what, " for ", peerLabel(), ": endpoint is not connected");
  }
  if (sendHead_ - sendTail_ >= sendRing_.size() || sendCq_.freeEntries() == 0) {
    return makeError(Code::kAgain, device(), ": ", what, " for ", peerLabel(), ": ",
                     sendCq_.freeEntries() == 0 ? "completion queue has no room" : "send queue full");
  }
  uint64_t sequence = sendHead_;
  sendRing_[sequence % sendRing_.size()] = {0, 0, Opcode::kSend, false, what};
  wr.wr_id = WorkId{WorkKind::kSend, epoch_, sequence}.encode();
  wr.send_flags |= IBV_SEND_SIGNALED;
  wr.next = nullptr;
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qp_, &wr, &bad); rc != 0) {
    return verbsCallError(strCat("ibv_post_send(", what, ")"), rc, device()).withContext(strCat("post to ", peerLabel()));
  }
  unsignaledRun_ = 0;  // signalled: frees the unsignalled requests before it too
  ++sendHead_;
  ++internalOutstanding_;
  sendCq_.reserve(1);
  return sequence;
}

bool VerbsEndpoint::awaitInternal(uint64_t sequence, Deadline deadline) {
  Backoff backoff;
  for (;;) {
    if (sequence < sendTail_) return state_ != EndpointState::kError;  // retired; a failure marks the endpoint
    if (auto succeeded = sendCq_.sendReachedBy(qp_->qp_num, epoch_, sequence)) return *succeeded;
    if (deadline.expired()) return false;
    backoff.pause();
  }
}

}  // namespace ibdt::fabric::verbs
