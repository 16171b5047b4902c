#include "transport/fabric/shm/completion_queue.h"

#include <time.h>

#include <algorithm>

#include "transport/fabric/shm/domain.h"
#include "transport/fabric/shm/endpoint.h"

namespace ibdt::fabric::shm {
namespace {

// Polling only needs the time for the peer liveness check (milliseconds):
// the coarse clock costs a quarter of steady_clock::now() on every poll.
// Both count CLOCK_MONOTONIC, so their time points compare.
std::chrono::steady_clock::time_point coarseNow() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  return std::chrono::steady_clock::time_point(std::chrono::seconds(now.tv_sec) +
                                               std::chrono::nanoseconds(now.tv_nsec));
}

}  // namespace

ShmCompletionQueue::ShmCompletionQueue(std::shared_ptr<DomainState> state, uint32_t doorbell, uint32_t depth)
    : state_(std::move(state)), doorbell_(doorbell), depth_(depth) {}

ShmCompletionQueue::~ShmCompletionQueue() {
  // Endpoints outliving their queue would touch freed memory: detach them.
  for (ShmEndpoint* endpoint : endpoints_) endpoint->forgetQueue(this);
  state_->releaseDoorbell(doorbell_);
}

void ShmCompletionQueue::attach(ShmEndpoint* endpoint) {
  if (byId_.emplace(endpoint->id(), endpoint).second) endpoints_.push_back(endpoint);
}

void ShmCompletionQueue::detach(ShmEndpoint* endpoint) {
  auto found = byId_.find(endpoint->id());
  if (found == byId_.end() || found->second != endpoint) return;
  byId_.erase(found);
  endpoints_.erase(std::remove(endpoints_.begin(), endpoints_.end(), endpoint), endpoints_.end());
}

void ShmCompletionQueue::progress(bool runActivity) {
  auto now = coarseNow();
  if (runActivity) state_->activity().progress(now);
  if (now - lastSweep_ < state_->livenessInterval() / 2) return;
  lastSweep_ = now;
  for (ShmEndpoint* endpoint : endpoints_) endpoint->progress(now);
}

size_t ShmCompletionQueue::poll(std::span<Completion> out) {
  if (ready_.size() < out.size()) {
    // Every run visits every active endpoint of the domain, whichever queue
    // it reports to: a second run in a row only repeats the first (350
    // instructions of each idle progress). Skipped once only, so a queue
    // polled alone still progresses on every poll after that. The liveness
    // sweep of our own endpoints is never skipped: a queue that always
    // follows another (two Contexts on one domain) still finds a dead peer.
    const uint64_t runs = state_->activity().runs();
    const bool skip = runs != activityRunsSeen_ && activityRunsSeen_ != ~uint64_t{0};
    progress(/*runActivity=*/!skip);
    activityRunsSeen_ = state_->activity().runs();
  }
  size_t count = std::min(out.size(), ready_.size());
  for (size_t i = 0; i < count; ++i) {
    out[i] = ready_.front();
    ready_.pop_front();
    if (out[i].opcode == Opcode::kRecv || out[i].opcode == Opcode::kRecvWriteWithImm) continue;
    // A send-queue slot of its endpoint is free again.
    if (auto found = byId_.find(out[i].endpointId); found != byId_.end()) found->second->completionPolled(out[i]);
  }
  return count;
}

Status ShmCompletionQueue::wait(Deadline deadline) {
  Doorbell& bell = state_->doorbell(doorbell_);
  for (;;) {
    if (!ready_.empty()) return Status::ok();
    bell.sleepers.fetch_add(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with ringDoorbell's fence
    uint32_t seen = bell.sequence.load(std::memory_order_seq_cst);
    progress();
    if (!ready_.empty()) {
      bell.sleepers.fetch_sub(1, std::memory_order_relaxed);
      return Status::ok();
    }
    if (deadline.expired()) {
      bell.sleepers.fetch_sub(1, std::memory_order_relaxed);
      return makeError(Code::kTimeout, "shm completion queue: no completion before the deadline");
    }
    // Wake up at least every liveness interval to notice dead peers.
    auto nap = std::min<std::chrono::nanoseconds>(state_->livenessInterval(), deadline.remaining());
    sleepOnDoorbell(bell, seen, nap);
    bell.sleepers.fetch_sub(1, std::memory_order_relaxed);
  }
}

}  // namespace ibdt::fabric::shm
