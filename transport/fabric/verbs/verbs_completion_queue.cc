#include "transport/fabric/verbs/verbs_completion_queue.h"

#include <fcntl.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>

#include "base/backoff.h"
#include "base/log.h"
#include "transport/fabric/verbs/verbs_endpoint.h"
#include "transport/fabric/verbs/verbs_receive_queue.h"
#include "transport/fabric/verbs/verbs_status.h"
#include "transport/fabric/verbs/verbs_work_id.h"

namespace ibdt::fabric::verbs {
namespace {
constexpr size_t kPollBatch = 32;
}

Result<std::unique_ptr<VerbsCompletionQueue>> VerbsCompletionQueue::create(ibv_context* context, uint32_t depth,
                                                                           std::string device) {
  if (depth == 0) return makeError(Code::kInvalidArgument, device, ": completion queue depth 0");
  ibv_comp_channel* channel = ibv_create_comp_channel(context);
  if (channel == nullptr) return verbsCallError("ibv_create_comp_channel", errno, device);
  // wait() polls the channel's fd with a timeout; reads from it must not block.
  int flags = fcntl(channel->fd, F_GETFL);
  if (flags < 0 || fcntl(channel->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    int error = errno;
    ibv_destroy_comp_channel(channel);
    return makeError(Code::kSystem, device, ": fcntl(O_NONBLOCK) on the completion channel failed: ",
                     std::strerror(error));
  }
  ibv_cq* cq = ibv_create_cq(context, static_cast<int>(depth), nullptr, channel, 0);
  if (cq == nullptr) {
    int error = errno;
    ibv_destroy_comp_channel(channel);
    return verbsCallError(strCat("ibv_create_cq(", depth, " entries)"), error, device);
  }
  return std::unique_ptr<VerbsCompletionQueue>(new VerbsCompletionQueue(channel, cq, depth, std::move(device)));
}

VerbsCompletionQueue::VerbsCompletionQueue(ibv_comp_channel* channel, ibv_cq* cq, uint32_t capacity,
                                           std::string device)
    : channel_(channel), cq_(cq), capacity_(capacity), device_(std::move(device)) {}

VerbsCompletionQueue::~VerbsCompletionQueue() {
  if (!endpoints_.empty()) {
    IBDT_LOG(kError, device_, ": completion queue destroyed while ", endpoints_.size(),
             " endpoint(s) still use it; destroy endpoints first");
  }
  sharedReceiveQueue_.reset();
  if (int rc = ibv_destroy_cq(cq_); rc != 0) IBDT_LOG(kWarn, device_, ": ibv_destroy_cq failed: ", std::strerror(rc));
  if (int rc = ibv_destroy_comp_channel(channel_); rc != 0) {
    IBDT_LOG(kWarn, device_, ": ibv_destroy_comp_channel failed: ", std::strerror(rc));
  }
}

void VerbsCompletionQueue::detach(uint32_t qpNumber) {
  endpoints_.erase(qpNumber);
  std::erase_if(software_, [qpNumber](const Completion& completion) { return completion.endpointId == qpNumber; });
}

void VerbsCompletionQueue::setSharedReceiveQueue(std::unique_ptr<VerbsReceiveQueue> queue) {
  sharedReceiveQueue_ = std::move(queue);
}

size_t VerbsCompletionQueue::fetch(size_t max) {
  size_t before = pending_.size();
  pending_.resize(before + max);
  int got = ibv_poll_cq(cq_, static_cast<int>(max), pending_.data() + before);
  if (got < 0) {
    IBDT_LOG(kError, device_, ": ibv_poll_cq failed (", got, ")");
    got = 0;
  }
  pending_.resize(before + static_cast<size_t>(got));
  return static_cast<size_t>(got);
}

void VerbsCompletionQueue::drain(VerbsEndpoint& endpoint, Deadline deadline) {
  Backoff backoff;
  size_t scanned = pendingHead_;
  while (endpoint.awaitsCompletionsOn(*this) && !deadline.expired()) {
    for (; scanned < pending_.size(); ++scanned) {
      ibv_wc& wc = pending_[scanned];
      if (wc.qp_num != endpoint.id()) continue;
      Completion discarded;
      translate(wc, discarded);
      wc.qp_num = 0;  // QP 0 is never an RC endpoint: poll() drops the entry
    }
    if (endpoint.awaitsCompletionsOn(*this)) {
      if (fetch(kPollBatch) == 0) backoff.pause();
    }
  }
}

std::optional<bool> VerbsCompletionQueue::sendReachedBy(uint32_t qpNumber, uint16_t epoch, uint64_t sequence) {
  auto scan = [&](size_t from) -> std::optional<bool> {
    for (size_t i = from; i < pending_.size(); ++i) {
      const ibv_wc& wc = pending_[i];
      WorkId id = WorkId::decode(wc.wr_id);
      if (wc.qp_num == qpNumber && id.kind == WorkKind::kSend && id.epoch == epoch && id.index >= sequence) {
        return wc.status == IBV_WC_SUCCESS;
      }
    }
    return std::nullopt;
  };
  if (auto seen = scan(pendingHead_)) return seen;
  size_t before = pending_.size();
  if (fetch(kPollBatch) == 0) return std::nullopt;
  return scan(before);
}

size_t VerbsCompletionQueue::poll(std::span<Completion> out) {
  size_t delivered = 0;
  while (delivered < out.size()) {
    if (pendingHead_ == pending_.size()) {
      pending_.clear();
      pendingHead_ = 0;
    }
    if (pendingHead_ == pending_.size() && fetch(std::min(kPollBatch, out.size() - delivered)) == 0) {
      for (; !software_.empty() && delivered < out.size(); software_.pop_front()) out[delivered++] = software_.front();
      break;
    }
    // Each entry yields at most one completion, so `out` cannot overflow.
    while (pendingHead_ < pending_.size() && delivered < out.size()) {
      if (translate(pending_[pendingHead_++], out[delivered])) ++delivered;
    }
  }
  return delivered;
}

bool VerbsCompletionQueue::translate(const ibv_wc& wc, Completion& out) {
  WorkId id = WorkId::decode(wc.wr_id);
  auto found = endpoints_.find(wc.qp_num);
  VerbsEndpoint* endpoint = found != endpoints_.end() ? found->second : nullptr;
  if (endpoint != nullptr && id.epoch != kSharedQueueEpoch && id.epoch != endpoint->epoch()) endpoint = nullptr;
  bool matched = false;
  out = Completion{};
  if (id.kind == WorkKind::kRecv && id.epoch == kSharedQueueEpoch && sharedReceiveQueue_ != nullptr) {
    matched = sharedReceiveQueue_->complete(wc, out);  // frees the slot even when the endpoint is gone
    matched = matched && endpoint != nullptr;
  } else if (endpoint != nullptr) {
    matched = id.kind == WorkKind::kRecv ? endpoint->receiveQueue().complete(wc, out)
                                         : endpoint->completeSend(wc, id.index, out);
  }
  if (endpoint == nullptr) {
    IBDT_LOG(kDebug, device_, ": dropped a completion of QP ", wc.qp_num, " (endpoint destroyed), status ",
             ibv_wc_status_str(wc.status));
    return false;
  }
  if (!matched) return false;
  out.endpointId = endpoint->id();
  if (wc.status != IBV_WC_SUCCESS) endpoint->noteFailure(wc, out.opcode);
  return true;
}

Status VerbsCompletionQueue::wait(Deadline deadline) {
  if (pendingHead_ < pending_.size() || !software_.empty()) return Status::ok();
  // Arm first, then look: an entry that arrived before arming is seen by the
  // poll, one that arrives after it raises the event.
  if (int rc = ibv_req_notify_cq(cq_, 0); rc != 0) return verbsCallError("ibv_req_notify_cq", rc, device_);
  if (fetch(kPollBatch) > 0) return Status::ok();
  for (;;) {
    // To the nanosecond: the messaging layer's waits sleep here for tens of
    // microseconds at a time, which whole milliseconds would stretch.
    timespec timeout{};
    if (!deadline.isNever()) {
      const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.remaining()).count();
      timeout.tv_sec = static_cast<time_t>(std::min<int64_t>(left / 1'000'000'000, int64_t{1} << 30));
      timeout.tv_nsec = static_cast<long>(left % 1'000'000'000);
    }
    pollfd fd{channel_->fd, POLLIN, 0};
    int ready = ::ppoll(&fd, 1, deadline.isNever() ? nullptr : &timeout, nullptr);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return makeError(Code::kSystem, device_, ": poll on the completion channel failed: ", std::strerror(errno));
    if (ready == 0) {
      if (!deadline.expired()) continue;
      return makeError(Code::kTimeout, device_, ": no completion arrived before the deadline");
    }
    ibv_cq* eventCq = nullptr;
    void* eventContext = nullptr;
    if (ibv_get_cq_event(channel_, &eventCq, &eventContext) == 0) ibv_ack_cq_events(eventCq, 1);
    return Status::ok();
  }
}

}  // namespace ibdt::fabric::verbs
