// tests/messaging/rogue_peer.h — a rank that speaks just enough of the
// messaging protocol to deliver chosen bytes to a real Context.
//
// It joins the job as a Context connecting eagerly does (fabric::connectMesh
// over the same allgather, every endpoint's receive buffers posted before
// the address exchange), through the public fabric API only: no hook in the
// library. Then a test SENDs crafted control messages, reads what the
// victim sends back (RTS, CTS, credits) and offers registered memory for the
// victim's RDMA writes. createLazy joins a job of Contexts that connect on
// demand instead: it publishes a listener as they do, and a test sends
// crafted connection datagrams and connects endpoints itself. Not thread-safe; `pump` (set by the test) drives the
// Contexts while the rogue waits, so one thread can run them all.
#pragma once

#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

#include "ibdt/deadline.h"
#include "ibdt/fabric.h"
#include "ibdt/messaging.h"
#include "transport/fabric/mesh.h"
#include "transport/messaging/connection_auth.h"

namespace ibdt::messaging::testing {

// What the rogue got from a peer: a SEND's bytes, or a write's immediate.
struct RogueMessage {
  std::vector<uint8_t> bytes;
  bool writeWithImm = false;
  uint32_t immData = 0;
};

class RoguePeer {
 public:
  // Collective with the Contexts of the other ranks (they call
  // Context::create with Connect::kEager and the same `options`).
  static Result<std::unique_ptr<RoguePeer>> create(fabric::Domain& domain, int rank, int size,
                                                   const fabric::Allgather& allgather, const Options& options);
  // Collective with Contexts created with Connect::kLazy: publishes a job
  // nonce and a listener address as they do and connects no endpoint.
  static Result<std::unique_ptr<RoguePeer>> createLazy(fabric::Domain& domain, int rank, int size,
                                                       const fabric::Allgather& allgather, const Options& options);
  ~RoguePeer();

  // --- lazy jobs (createLazy) ---
  // The job nonce the Contexts put in their datagrams (rank 0's).
  uint64_t job() const { return job_; }
  // Sends one datagram to `peer`'s listener, sealed with the job's key as a
  // member of the job seals it, unless it is too long to carry the tag
  // (kAgain: its inbox is full).
  Status sendDatagram(int peer, std::span<const uint8_t> datagram);
  // Sends `bytes` as they are (a process without the job's key).
  Status sendRawDatagram(int peer, std::span<const uint8_t> bytes);
  // The job's datagram key (rank 0's), as every member of the job learns it.
  const connection::DatagramKey& datagramKey() const { return key_; }
  // The next datagram sent to the rogue, its tag checked and removed;
  // kTimeout when none arrives within 30 s.
  Result<std::vector<uint8_t>> awaitDatagram();
  fabric::Listener& listener() { return *listener_; }
  // Our endpoint toward `peer`, its receive buffers posted (created on first use).
  Result<std::vector<uint8_t>> endpointAddress(int peer);
  Status connect(int peer, std::span<const uint8_t> address);

  // Drives the other ranks while the rogue waits (one thread runs them all).
  std::function<void()> pump = [] {};

  // Sends `bytes` to `peer` as one SEND and waits until it completed.
  Status send(int peer, std::span<const uint8_t> bytes);
  // RDMA WRITE_WITH_IMM of `bytes` to (address, rkey) at `peer`.
  Status writeWithImm(int peer, std::span<const uint8_t> bytes, uint64_t address, uint64_t rkey, uint32_t imm);
  // The next message `peer` sent us (its buffer is reposted); kTimeout
  // when none arrives within 30 s.
  Result<RogueMessage> receive(int peer);

  // Registered memory (remote write and read) to offer in a crafted reply.
  fabric::MemoryRegion& memory() { return *memory_; }

 private:
  RoguePeer(fabric::Domain& domain, int size, const Options& options);
  Status postSlot(fabric::Endpoint& endpoint, int peer, uint32_t slot);
  Status createQueues(int size);
  Status prepare(fabric::Endpoint& endpoint, int peer);
  // Copies `bytes` into the send buffer, posts `request` with it, waits.
  Status post(int peer, std::span<const uint8_t> bytes, fabric::SendRequest request);
  Status waitSend();
  void poll();

  fabric::Domain& domain_;
  size_t slotSize_;
  uint32_t slots_;
  std::unique_ptr<fabric::CompletionQueue> sendQueue_;
  std::unique_ptr<fabric::CompletionQueue> recvQueue_;
  std::vector<std::unique_ptr<fabric::Endpoint>> endpoints_;  // by peer rank
  std::vector<std::unique_ptr<fabric::MemoryRegion>> recvSlots_;
  std::vector<std::deque<RogueMessage>> arrived_;
  std::unique_ptr<fabric::MemoryRegion> sendBuffer_;
  std::unique_ptr<fabric::MemoryRegion> memory_;
  std::unique_ptr<fabric::Listener> listener_;
  uint64_t job_ = 0;
  connection::DatagramKey key_;
  std::vector<std::vector<uint8_t>> listenerAddresses_;  // by peer rank (lazy jobs)
  std::vector<std::optional<uint32_t>> listenerHandles_;
  uint64_t sendsCompleted_ = 0;
  Status sendFailure_;
};

// Control messages put together field by field: trivially copyable structs
// and byte spans appended in order.
class Crafted {
 public:
  template <typename T>
  requires std::is_trivially_copyable_v<T> Crafted& add(const T& value) {
    const auto* raw = reinterpret_cast<const uint8_t*>(&value);
    bytes_.insert(bytes_.end(), raw, raw + sizeof(T));
    return *this;
  }
  Crafted& add(std::span<const uint8_t> raw) {
    bytes_.insert(bytes_.end(), raw.begin(), raw.end());
    return *this;
  }
  // Drops the last `count` bytes (truncated messages).
  Crafted& chop(size_t count) {
    bytes_.resize(bytes_.size() - std::min(count, bytes_.size()));
    return *this;
  }
  operator std::span<const uint8_t>() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

}  // namespace ibdt::messaging::testing
