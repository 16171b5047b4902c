// transport/fabric/verbs/verbs_receive_queue.h — posting receives and
// matching their completions, for a QP's own receive queue or a shared
// receive queue (SRQ).
//
// Receives on an SRQ are consumed by whichever QP a message arrives on, so
// they complete in any order: the caller's ids live in a slot table with a
// free list, and wr_id names the slot.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ibdt/fabric.h"

namespace ibdt::fabric::verbs {

class VerbsCompletionQueue;

class VerbsReceiveQueue {
 public:
  // A QP's own receive queue (the QP is attached later, by setQueuePair).
  VerbsReceiveQueue(VerbsCompletionQueue& cq, uint32_t depth, uint32_t maxSge, uint16_t epoch, std::string device);
  // A shared receive queue on `pd` whose completions arrive on `cq`.
  static Result<std::unique_ptr<VerbsReceiveQueue>> createShared(ibv_pd* pd, VerbsCompletionQueue& cq, uint32_t depth,
                                                                 uint32_t maxSge, std::string device);
  ~VerbsReceiveQueue();
  VerbsReceiveQueue(const VerbsReceiveQueue&) = delete;
  VerbsReceiveQueue& operator=(const VerbsReceiveQueue&) = delete;

  void setQueuePair(ibv_qp* qp) { qp_ = qp; }
  ibv_srq* sharedQueue() const { return srq_; }
  uint32_t maxSge() const { return maxSge_; }
  uint32_t outstanding() const { return depth_ - static_cast<uint32_t>(free_.size()); }

  Status post(const RecvRequest& first, const RecvRequest** badRequest, const std::string& peer);
  // Completes each request as kFlushed without giving it to the device.
  Status flush(const RecvRequest& first, const RecvRequest** badRequest, const std::string& peer,
               uint32_t endpointId);
  // Fills `out` from a receive completion; false when wr_id names no posted
  // receive (a stale entry).
  bool complete(const ibv_wc& wc, Completion& out);
  // Gives back the CQ entries of receives that will never complete (QP destroyed).
  void abandon();

 private:
  Status validate(const RecvRequest& request, const std::string& peer) const;

  VerbsCompletionQueue& cq_;
  ibv_qp* qp_ = nullptr;
  ibv_srq* srq_ = nullptr;
  uint32_t depth_;
  uint32_t maxSge_;
  uint16_t epoch_;
  std::string device_;
  std::vector<uint64_t> userIds_;
  std::vector<uint8_t> inUse_;
  std::vector<uint32_t> free_;
  std::vector<ibv_recv_wr> scratch_;
  std::vector<const RecvRequest*> scratchRequests_;
};

}  // namespace ibdt::fabric::verbs

namespace ibdt::fabric::verbs {

// Sge has the layout of struct ibv_sge, so lists are handed to verbs as they are.
static_assert(sizeof(Sge) == sizeof(ibv_sge) && offsetof(Sge, address) == offsetof(ibv_sge, addr) &&
              offsetof(Sge, length) == offsetof(ibv_sge, length) && offsetof(Sge, lkey) == offsetof(ibv_sge, lkey));
// verbs never writes through sg_list; its type is just not const.
inline ibv_sge* asIbvSge(const Sge* sge) { return reinterpret_cast<ibv_sge*>(const_cast<Sge*>(sge)); }

}  // namespace ibdt::fabric::verbs
