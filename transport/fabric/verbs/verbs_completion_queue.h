// transport/fabric/verbs/verbs_completion_queue.h — an ibv_cq with a
// completion channel, shared by any number of endpoints.
//
// poll() turns work completions into Completions through the endpoint that
// owns them (found by QP number): it restores the caller's request ids,
// swallows the completions of requests the provider signalled only to free
// send-queue slots, and marks an endpoint failed on its first error.
//
// CQ overflow is avoided by reservation: every posted request may produce an
// entry (failures and flushes always do, even unsignalled ones), so a post
// takes one entry per request and fails with kAgain when none is left;
// poll() gives them back as the requests retire.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "ibdt/fabric.h"

namespace ibdt::fabric::verbs {

class VerbsEndpoint;
class VerbsReceiveQueue;

class VerbsCompletionQueue final : public CompletionQueue {
 public:
  static Result<std::unique_ptr<VerbsCompletionQueue>> create(ibv_context* context, uint32_t depth,
                                                              std::string device);
  ~VerbsCompletionQueue() override;

  size_t poll(std::span<Completion> out) override;
  Status wait(Deadline deadline) override;

  ibv_cq* handle() const { return cq_; }
  ibv_context* context() const { return cq_->context; }
  const std::string& device() const { return device_; }

  uint32_t freeEntries() const { return capacity_ - reserved_; }
  void reserve(uint32_t entries) { reserved_ += entries; }
  void release(uint32_t entries) { reserved_ -= entries; }

  void attach(uint32_t qpNumber, VerbsEndpoint* endpoint) { endpoints_[qpNumber] = endpoint; }
  // Retires, without returning them, the entries `endpoint` still has coming
  // (its QP is in ERR, so everything outstanding flushes); other endpoints'
  // entries stay queued for poll(). Gives up at `deadline`.
  void drain(VerbsEndpoint& endpoint, Deadline deadline);
  // Whether the device has reported a send-queue entry of QP `qpNumber`
  // (epoch `epoch`) at or after `sequence`, polling it once more if not:
  // nullopt when none yet, else whether that entry succeeded. Sends execute
  // in order, so such an entry means request `sequence` was carried out
  // (and succeeded if the entry did). Entries stay queued for poll().
  std::optional<bool> sendReachedBy(uint32_t qpNumber, uint16_t epoch, uint64_t sequence);
  // Forgets the endpoint, and the completions the provider made for it.
  void detach(uint32_t qpNumber);

  // A completion made by the provider itself (a receive posted after its QP
  // failed); returned once the device has no entry left, so order is kept.
  void addSoftwareCompletion(const Completion& completion) { software_.push_back(completion); }

  // The SRQ of the endpoints whose receives complete here (IBDT_VERBS_SRQ=1).
  VerbsReceiveQueue* sharedReceiveQueue() const { return sharedReceiveQueue_.get(); }
  void setSharedReceiveQueue(std::unique_ptr<VerbsReceiveQueue> queue);

 private:
  VerbsCompletionQueue(ibv_comp_channel* channel, ibv_cq* cq, uint32_t capacity, std::string device);
  // Polls the device into pending_; returns how many entries were added.
  size_t fetch(size_t max);
  bool translate(const ibv_wc& wc, Completion& out);

  ibv_comp_channel* channel_;
  ibv_cq* cq_;
  uint32_t capacity_;
  uint32_t reserved_ = 0;
  std::string device_;
  std::unordered_map<uint32_t, VerbsEndpoint*> endpoints_;
  std::unique_ptr<VerbsReceiveQueue> sharedReceiveQueue_;
  std::vector<ibv_wc> pending_;  // polled from the device, not yet returned
  size_t pendingHead_ = 0;
  std::deque<Completion> software_;
};

}  // namespace ibdt::fabric::verbs
