// transport/fabric/shm/completion_queue.h — a completion queue of the shm
// provider. Polling drives progress of the endpoints attached to it
// (inbound notifications, sends waiting for a receive, peer liveness);
// wait() sleeps on a futex doorbell that peers ring.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "ibdt/fabric.h"

namespace ibdt::fabric::shm {

class DomainState;
class ShmEndpoint;

class ShmCompletionQueue final : public CompletionQueue {
 public:
  ShmCompletionQueue(std::shared_ptr<DomainState> state, uint32_t doorbell, uint32_t depth);
  ~ShmCompletionQueue() override;

  size_t poll(std::span<Completion> out) override;
  Status wait(Deadline deadline) override;

  DomainState* state() const { return state_.get(); }
  uint32_t doorbell() const { return doorbell_; }
  void attach(ShmEndpoint* endpoint);
  void detach(ShmEndpoint* endpoint);
  void push(const Completion& completion) { ready_.push_back(completion); }
  bool full() const { return ready_.size() >= depth_; }

 private:
  // Runs progress on the endpoints the domain's activity summary names
  // (transport/fabric/shm/activity.h; not when `runActivity` is false), and
  // on all attached ones once per half liveness interval (dead peers).
  void progress(bool runActivity = true);

  std::shared_ptr<DomainState> state_;
  uint32_t doorbell_;
  uint32_t depth_;
  std::deque<Completion> ready_;
  std::vector<ShmEndpoint*> endpoints_;  // swept for liveness
  // By id: a send completion frees a slot of its endpoint, found without
  // walking every connected peer's endpoint (many ranks per node).
  std::unordered_map<uint32_t, ShmEndpoint*> byId_;
  std::chrono::steady_clock::time_point lastSweep_{};
  // The domain's activity runs when this queue last ran or skipped one: a
  // poll right after another queue of the domain ran the summary (the
  // messaging layer polls its receive queue, then its send queue) finds
  // what that run found in its ready list, and skips its own.
  uint64_t activityRunsSeen_ = ~uint64_t{0};
};

}  // namespace ibdt::fabric::shm
