#include "transport/fabric/verbs/verbs_receive_queue.h"

#include <arpa/inet.h>

#include <cstring>

#include "base/log.h"
#include "transport/fabric/verbs/verbs_completion_queue.h"
#include "transport/fabric/verbs/verbs_status.h"
#include "transport/fabric/verbs/verbs_work_id.h"

namespace ibdt::fabric::verbs {

VerbsReceiveQueue::VerbsReceiveQueue(VerbsCompletionQueue& cq, uint32_t depth, uint32_t maxSge, uint16_t epoch,
                                     std::string device)
    : cq_(cq), depth_(depth), maxSge_(maxSge), epoch_(epoch), device_(std::move(device)),
      userIds_(depth), inUse_(depth, 0), scratch_(depth) {
  free_.reserve(depth);
  for (uint32_t slot = depth; slot > 0; --slot) free_.push_back(slot - 1);
}

Result<std::unique_ptr<VerbsReceiveQueue>> VerbsReceiveQueue::createShared(ibv_pd* pd, VerbsCompletionQueue& cq,
                                                                           uint32_t depth, uint32_t maxSge,
                                                                           std::string device) {
  ibv_srq_init_attr attr{};
  attr.attr.max_wr = depth;
  attr.attr.max_sge = maxSge;
  ibv_srq* srq = ibv_create_srq(pd, &attr);
  if (srq == nullptr) return verbsCallError(strCat("ibv_create_srq(", depth, " receives)"), errno, device);
  // The device may round the depth up; the slot table uses what it granted.
  std::unique_ptr<VerbsReceiveQueue> queue(
      new VerbsReceiveQueue(cq, attr.attr.max_wr, maxSge, kSharedQueueEpoch, std::move(device)));
  queue->srq_ = srq;
  return queue;
}

VerbsReceiveQueue::~VerbsReceiveQueue() {
  if (srq_ != nullptr) {
    abandon();
    if (int rc = ibv_destroy_srq(srq_); rc != 0) IBDT_LOG(kWarn, device_, ": ibv_destroy_srq failed: ", std::strerror(rc));
  }
}

Status VerbsReceiveQueue::validate(const RecvRequest& request, const std::string& peer) const {
  if (request.numSge <= maxSge_ && (request.numSge == 0 || request.sgList != nullptr)) return Status::ok();
  return makeError(Code::kInvalidArgument, device_, ": postRecv (id ", request.id, ", peer ", peer, "): ",
                   request.numSge > maxSge_ ? strCat(request.numSge, " SGEs exceed maxRecvSge ", maxSge_)
                                            : std::string("null sgList"));
}

Status VerbsReceiveQueue::flush(const RecvRequest& first, const RecvRequest** badRequest, const std::string& peer,
                                uint32_t endpointId) {
  for (const RecvRequest* request = &first; request != nullptr; request = request->next) {
    Status status = validate(*request, peer);
    if (!status.isOk()) {
      if (badRequest != nullptr) *badRequest = request;
      return status;
    }
    cq_.addSoftwareCompletion(Completion{.id = request->id, .opcode = Opcode::kRecv,
                                         .status = CompletionStatus::kFlushed, .endpointId = endpointId});
  }
  if (badRequest != nullptr) *badRequest = nullptr;
  return Status::ok();
}

Status VerbsReceiveQueue::post(const RecvRequest& first, const RecvRequest** badRequest, const std::string& peer) {
  Status status;
  const RecvRequest* stop = nullptr;
  std::vector<const RecvRequest*>& requests = scratchRequests_;
  requests.clear();
  for (const RecvRequest* request = &first; request != nullptr; request = request->next) {
    status = validate(*request, peer);
    if (!status.isOk()) {
      stop = request;
      break;
    }
    size_t index = requests.size();
    if (index >= free_.size() || index >= cq_.freeEntries()) {
      status = makeError(Code::kAgain, device_, ": postRecv: ",
                         index >= free_.size() ? "receive queue full" : "completion queue has no room");
      stop = request;
      break;
    }
    uint32_t slot = free_[free_.size() - 1 - index];
    ibv_recv_wr& wr = scratch_[index];
    wr = {};
    wr.wr_id = WorkId{WorkKind::kRecv, epoch_, slot}.encode();
    wr.sg_list = asIbvSge(request->sgList);
    wr.num_sge = static_cast<int>(request->numSge);
    requests.push_back(request);
  }
  size_t posted = requests.size();
  if (posted > 0) {
    for (size_t i = 0; i + 1 < posted; ++i) scratch_[i].next = &scratch_[i + 1];
    ibv_recv_wr* badWr = nullptr;
    int rc = srq_ != nullptr ? ibv_post_srq_recv(srq_, scratch_.data(), &badWr)
                             : ibv_post_recv(qp_, scratch_.data(), &badWr);
    if (rc != 0) {
      posted = badWr != nullptr ? static_cast<size_t>(badWr - scratch_.data()) : 0;
      stop = requests[posted];
      status = rc == ENOMEM ? makeError(Code::kAgain, device_, ": ibv_post_recv: queue full")
                            : verbsCallError(srq_ != nullptr ? "ibv_post_srq_recv" : "ibv_post_recv", rc, device_);
    }
    for (size_t i = 0; i < posted; ++i) {
      uint32_t slot = free_.back();
      free_.pop_back();
      inUse_[slot] = 1;
      userIds_[slot] = requests[i]->id;
    }
    cq_.reserve(static_cast<uint32_t>(posted));
  }
  if (badRequest != nullptr) *badRequest = stop;
  return status;
}

bool VerbsReceiveQueue::complete(const ibv_wc& wc, Completion& out) {
  uint64_t slot = WorkId::decode(wc.wr_id).index;
  if (slot >= depth_ || !inUse_[slot]) return false;
  inUse_[slot] = 0;
  free_.push_back(static_cast<uint32_t>(slot));
  cq_.release(1);
  bool success = wc.status == IBV_WC_SUCCESS;
  out.id = userIds_[slot];
  out.status = translateWcStatus(wc.status);
  out.opcode = success && wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM ? Opcode::kRecvWriteWithImm : Opcode::kRecv;
  out.hasImm = success && (wc.wc_flags & IBV_WC_WITH_IMM) != 0;
  out.immData = out.hasImm ? ntohl(wc.imm_data) : 0;
  out.byteLength = success ? wc.byte_len : 0;
  out.vendorError = wc.vendor_err;
  return true;
}

void VerbsReceiveQueue::abandon() {
  cq_.release(outstanding());
  free_.clear();
  for (uint32_t slot = depth_; slot > 0; --slot) free_.push_back(slot - 1);
  std::fill(inUse_.begin(), inUse_.end(), 0);
}

}  // namespace ibdt::fabric::verbs
