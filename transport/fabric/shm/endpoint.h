// transport/fabric/shm/endpoint.h — an RC endpoint of the shm provider.
//
// The initiator carries out every request itself, in posting order:
//   * WRITE/READ: checks the rkey against the target's registration table,
//     then copies (memcpy into a mapped shared segment, or one
//     process_vm_writev/readv with iovec lists on both sides);
//   * SEND and WRITE_WITH_IMM: take the next receive from the target's
//     receive ring, copy the payload into its buffers (SEND), then push a
//     notification into the target's notification ring, set the target
//     endpoint's bit in its activity summary (activity.h) unless it polls
//     the ring directly, and ring its doorbell.
// A SEND or WRITE_WITH_IMM finding no posted receive waits in the send queue
// (like an RNR retry) and is retried by progress; so does everything posted
// after it, keeping requests in order. kFence holds trivially: a READ has
// completed before the next request starts.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "ibdt/fabric.h"
#include "transport/fabric/shm/layout.h"
#include "transport/fabric/shm/peer.h"
#include "transport/fabric/shm/remote_copy.h"
#include "base/shared_region.h"

namespace ibdt::fabric::shm {

class DomainState;
class ShmCompletionQueue;

class ShmEndpoint final : public Endpoint {
 public:
  // How much of a just-completed receive is prefetched (see prefetchReceived).
  static constexpr uint64_t kPrefetchBytes = 1024;
  static Result<std::unique_ptr<Endpoint>> create(std::shared_ptr<DomainState> state, ShmCompletionQueue& sendQueue,
                                                  ShmCompletionQueue& recvQueue, const EndpointOptions& options);
  ~ShmEndpoint() override;

  std::vector<uint8_t> address() const override;
  Status connect(std::span<const uint8_t> peerAddress) override;
  Status postSend(const SendRequest& first, const SendRequest** badRequest = nullptr) override;
  Status postRecv(const RecvRequest& first, const RecvRequest** badRequest = nullptr) override;
  Status postSendPacked(const PackedSend& send) override;
  EndpointState state() const override { return state_; }
  uint32_t id() const override { return id_; }

  // Called by the completion queues.
  void progress(std::chrono::steady_clock::time_point now);
  void completionPolled(const Completion& completion);
  void forgetQueue(ShmCompletionQueue* queue);
  bool hasPendingSends() const { return !pending_.empty(); }
  // Tells the peer whether we poll our notification ring on every progress
  // (activity.h); turning it off drains the ring once more.
  void setPolledDirectly(bool on, std::chrono::steady_clock::time_point now);

 private:
  // A send request as executed: the caller's (fast path) or a stored copy.
  struct Work {
    SendRequest request;
    std::span<const Sge> sges;
    std::span<const uint8_t> inlineData;  // set for kInline requests that had to wait
    uint64_t length = 0;
  };
  struct Pending {
    SendRequest request;
    std::vector<Sge> sges;
    std::vector<uint8_t> inlineData;
    uint64_t length = 0;
    Work work() const;
  };
  enum class Step { kDone, kBlocked };
  // Our own position in a shared ring: the running index as published to
  // the other side, and index % capacity kept alongside, so the hot paths
  // pay no 64-bit division (tens of cycles each, several per message and
  // per poll) and never take a ring position from memory the peer can write.
  struct RingCursor {
    uint64_t index = 0;
    uint32_t slot = 0;
    uint32_t capacity = 1;
    void reset(uint64_t at, uint32_t size) {
      index = at;
      capacity = size;
      slot = static_cast<uint32_t>(at % size);
    }
    void advance() {
      ++index;
      if (++slot == capacity) slot = 0;
    }
    // The slot `back` (<= capacity) entries before this one.
    uint32_t slotBefore(uint64_t back) const {
      return static_cast<uint32_t>(slot >= back ? slot - back : slot + capacity - back);
    }
  };

  ShmEndpoint(std::shared_ptr<DomainState> state, ShmCompletionQueue& sendQueue, ShmCompletionQueue& recvQueue);

  Status validate(const SendRequest& request, uint64_t& length) const;
  // Executes a run of plain writes to the peer's user memory starting at
  // `first` with one cross-memory call (the Multi-W pattern); returns the
  // first request it did not execute.
  const SendRequest* writeBatch(const SendRequest* first);
  Step execute(const Work& work, CompletionStatus& status);
  Step executeSend(const Work& work, std::span<const iovec> local, CompletionStatus& status);
  Step executeOneSided(const Work& work, std::span<const iovec> local, CompletionStatus& status);
  bool peerReceiveAvailable();
  // Takes the peer's next receive off its ring (its slot was used).
  void consumePeerReceive();
  void notifyPeer(Opcode opcode, CompletionStatus status, uint32_t byteLength, bool hasImm, uint32_t immData);
  void pushNotification(const Notification& note);
  bool crossMemoryAttach() const;
  // Bounce path: moves the head request's bytes through our bounce buffer
  // one chunk at a time, the peer copying to/from its own memory; kBlocked
  // until the last chunk is acknowledged.
  Step bounce(NotificationKind kind, std::span<const iovec> local, uint64_t rkey, uint64_t remoteAddress,
              uint64_t total);
  // Target side of the bounce path.
  void serveBounce(const Notification& note);
  void finish(const Work& work, CompletionStatus status);
  void progressSends();
  // Turns inbound notifications into receive completions; false when one
  // reported an error (the endpoint must then fail).
  bool drainNotifications();
  // Starts loading what a receive just got (written by the peer's core,
  // so every line misses): the consumer reads it next, and the misses
  // overlap instead of coming one by one as it walks the bytes.
  void prefetchReceived(size_t outstanding, uint32_t byteLength) const;
  void checkPeer(std::chrono::steady_clock::time_point now);
  // Moves to the error state and flushes everything outstanding; the first
  // flushed request reports `cause` when it is not kFlushed.
  void fail(CompletionStatus cause);
  CompletionStatus flushStatus();
  void pushSend(const Completion& completion);
  void pushRecv(const Completion& completion);

  std::shared_ptr<DomainState> domain_;
  ShmCompletionQueue* sendQueue_;
  ShmCompletionQueue* recvQueue_;
  uint32_t id_ = 0;
  EndpointState state_ = EndpointState::kCreated;
  uint32_t sendDepth_ = 0;
  uint32_t recvDepth_ = 0;
  uint32_t maxSendSge_ = 0;
  uint32_t maxRecvSge_ = 0;
  uint32_t maxInline_ = 0;
  uint32_t recvSlotSize_ = 0;  // our geometry, kept here: the peer can write our segment
  uint32_t activitySlot_ = kNoActivitySlot;      // our bit in our domain's activity summary
  uint32_t peerActivitySlot_ = kNoActivitySlot;  // the peer endpoint's bit in its domain's

  SharedRegion segment_;
  EndpointHeader* header_ = nullptr;
  uint8_t* recvSlots_ = nullptr;
  NotificationSlot* notifications_ = nullptr;
  uint8_t* bounce_ = nullptr;
  uint64_t bounceIssued_ = 0;  // bounce requests pushed to the peer
  uint64_t bounceDone_ = 0;    // bytes of the head request moved so far
  uint32_t bounceChunk_ = 0;   // bytes of the chunk in flight, 0 when none
  RingCursor recvPosted_;      // our receive ring's head
  RingCursor notifyTaken_;     // our notification ring's tail

  std::shared_ptr<PeerDomain> peer_;
  SharedRegion peerSegment_;
  EndpointHeader* peerHeader_ = nullptr;
  uint8_t* peerRecvSlots_ = nullptr;
  NotificationSlot* peerNotifications_ = nullptr;
  uint8_t* peerBounce_ = nullptr;
  uint32_t peerRecvDoorbell_ = 0;
  uint32_t peerSendDoorbell_ = 0;
  uint32_t peerRecvDepth_ = 1;
  uint32_t peerRecvSlotSize_ = 0;
  uint32_t peerNotifyCapacity_ = 1;
  uint32_t peerBounceSize_ = 0;
  uint64_t peerRecvHead_ = 0;  // the peer's receive-ring head as last read
  RingCursor peerRecvTaken_;   // the peer's receive ring's tail (we consume)
  RingCursor peerNotifyPut_;   // the peer's notification ring's head (we produce)

  std::deque<Pending> pending_;
  std::deque<uint64_t> postedRecvs_;
  // Our posted receives' scatter lists as we checked them, by ring slot: the
  // copy in our segment is for the peer to read, and the peer can rewrite it
  // (a bounce receive scatters into what this copy says, never that one).
  std::vector<RecvSge> ownRecvSges_;  // recvDepth_ x maxRecvSge_
  std::vector<uint32_t> ownRecvCounts_;
  uint32_t sendInUse_ = 0;
  uint32_t vendorError_ = 0;  // errno of the failed system call, for the completion  // send-queue slots: pending, or completed but not yet polled
  bool lossUnreported_ = false;
  std::chrono::steady_clock::time_point lastPeerCheck_{};
};

}  // namespace ibdt::fabric::shm
