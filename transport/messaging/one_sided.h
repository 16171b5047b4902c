// transport/messaging/one_sided.h — persistent one-sided puts
// (docs/alltoall-direct-writes.md).
//
// The target registers its receive buffer once (through the pin-down cache)
// and sends the origin its remote key in an ordinary message; the origin
// registers its send buffer once. A started put posts RDMA WRITEs from the
// send buffer straight into the target's buffer and, once they completed
// (an RC write completes after the target's memory holds the data), sends a
// zero-byte message with the put's tag: the target's persistent exposure
// request is a receive of that message, so its completion says the buffer
// is whole. Nothing is registered, allocated or exchanged at start.
//
// The origin must not start a put before the target's buffer may be
// overwritten (the target started its exposure): the caller orders that
// (the direct-write alltoall sends a "ready" first, carrying its key).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "ibdt/fabric.h"
#include "ibdt/messaging.h"
#include "transport/memory/registration_cache.h"

namespace ibdt::messaging {

class ContextImpl;
struct Operation;

// What a put or an exposure keeps between runs; held by its Operation.
struct OneSidedChannel {
  uint32_t id = 0;
  memory::RegionRef region;  // the local buffer's registration (none for 0 bytes)
  const std::byte* local = nullptr;
  int64_t bytes = 0;
  int peer = 0;
  fabric::RemoteKey remote;  // origin: the target's buffer
  // Target: the key message, packed when its eager send leaves (maybe later).
  std::array<uint8_t, fabric::RemoteKey::kWireSize> keyWire{};
  std::shared_ptr<Operation> keySend;
  // Origin: the run whose writes are in flight, how many are left, and the
  // first failure among them.
  std::shared_ptr<Operation> running;
  uint32_t writesLeft = 0;
  Status failure;
};

class OneSided {
 public:
  // What a put needs of the core beyond its public operations: memory
  // registered through the pin-down cache, a peer's state, and its send
  // queue for the writes.
  class Host {
   public:
    virtual ~Host() = default;
    virtual Result<memory::RegionRef> acquireRegion(const void* buf, size_t bytes, uint32_t access) = 0;
    // Why `rank` failed; ok while it has not.
    virtual const Status& peerFailure(int rank) const = 0;
    // Posts all of `requests` to `rank` as one chain, or nothing (false)
    // while its link is not up or its send queue lacks room for them.
    virtual Result<bool> postAllOrNone(int rank, std::vector<fabric::SendRequest>& requests) = 0;
    virtual uint64_t maxWriteBytes() const = 0;
    virtual uint32_t sendQueueDepth() const = 0;
  };

  // `context`'s public operations send and receive the keys and the notifications.
  OneSided(ContextImpl& context, Host& host) : context_(context), host_(host) {}
  ~OneSided();  // releases the registrations of channels still alive (the cache dies with the context)
  OneSided(const OneSided&) = delete;
  OneSided& operator=(const OneSided&) = delete;

  // Target: registers [buf, buf + bytes), sends its key to `origin`; the
  // result is a persistent zero-byte receive of the put's notification.
  Result<std::shared_ptr<Operation>> expose(void* buf, int64_t bytes, int origin, int tag, uint32_t communicator,
                                            Deadline deadline);
  // Origin: registers [buf, buf + bytes), waits for the target's key; the
  // result is a persistent put (start() goes through start below).
  Result<std::shared_ptr<Operation>> put(const void* buf, int64_t bytes, int target, int tag, uint32_t communicator,
                                         Deadline deadline);
  // Moves an inactive channel's local buffer to `buf` (same length); an
  // exposure's key, serialized (Context::rebindOneSided).
  Result<Context::OneSidedKey> rebind(Operation& op, const void* buf);
  // Points an inactive put at the target buffer of `wire` (Context::retargetPut).
  Status retarget(Operation& op, std::span<const uint8_t> wire);
  // Starts a run of a put readied by ContextImpl::rearm.
  Status start(const std::shared_ptr<Operation>& op);
  // A WRITE of channel `id` completed (its error, if it failed).
  void writeCompleted(uint32_t id, Status status);
  // Posts the writes of runs that waited for room in the send queue.
  Status advance();
  bool waiting() const { return !waiting_.empty(); }

 private:
  Result<std::shared_ptr<OneSidedChannel>> newChannel(const void* buf, int64_t bytes, int peer, uint32_t access);
  // Posts every WRITE of the channel's run, or nothing (false) when the
  // peer's send queue lacks room for them.
  Result<bool> postWrites(OneSidedChannel& channel);
  // The writes are done: send the notification, or fail the run.
  void finishWrites(OneSidedChannel& channel);

  ContextImpl& context_;
  Host& host_;
  std::vector<fabric::SendRequest> requests_;  // postWrites' lists, reused
  std::vector<fabric::Sge> sges_;
  uint32_t nextId_ = 1;
  std::unordered_map<uint32_t, std::weak_ptr<OneSidedChannel>> channels_;
  std::deque<std::weak_ptr<OneSidedChannel>> waiting_;  // runs whose writes wait for send-queue room
  // Channels of exposeInits that timed out: their key send may still be posted.
  std::vector<std::shared_ptr<OneSidedChannel>> unsentKeys_;
};

}  // namespace ibdt::messaging
