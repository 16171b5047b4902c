// transport/messaging/rendezvous_services.h — what the rendezvous sender
// and receiver (rendezvous_sender.h, rendezvous_receiver.h) may ask of the
// core: besides the protocol objects' services (memory, credits, control
// messages, layout caches), the limits of a work request, room in a peer's
// send queue, posting writes and reads, and waking a peer's progress.
#pragma once

#include <cstdint>
#include <vector>

#include "ibdt/fabric.h"
#include "transport/messaging/protocol_services.h"

namespace ibdt::messaging {

class RendezvousServices : public ProtocolServices {
 public:
  virtual int selfRank() const = 0;
  virtual uint64_t maxWriteBytes() const = 0;
  virtual uint32_t maxSgePerRequest() const = 0;
  // The send queue's depth, and what of it is free toward `rank`.
  virtual uint32_t sendQueueDepth() const = 0;
  virtual uint32_t sendRoom(int rank) const = 0;
  // Whether another READ may go to `rank` (send queue and reads in flight).
  virtual bool readRoom(int rank) const = 0;
  // Posts `requests` to `rank` as one chained list and clears it.
  virtual Status postWrites(int rank, std::vector<fabric::SendRequest>& requests) = 0;
  virtual Status postRead(int rank, const fabric::SendRequest& request) = 0;
  // A write with immediate consumes one of `rank`'s eager credits.
  virtual void spendCredit(int rank) = 0;
  // `rank` has rendezvous work for progress() to advance.
  virtual void wake(int rank) = 0;
};

// Ids of the transfers of both sides, unique within a Context.
class TransferIds {
 public:
  uint32_t next() { return next_++; }

 private:
  uint32_t next_ = 1;
};

// Work request ids: the kind in the top byte, the rest identifies the object.
// kRecvSlot: a peer's own receive buffer; kPoolSlot: one of the shared pool's
// (receive_pool.h), whoever sent into it.
enum class WrKind : uint8_t { kSlot = 1, kSendData, kRead, kRecvSlot, kInPlace, kOneSided, kPoolSlot };
inline uint64_t wrId(WrKind kind, uint64_t value) { return (uint64_t{static_cast<uint8_t>(kind)} << 56) | value; }
inline WrKind wrKind(uint64_t id) { return static_cast<WrKind>(id >> 56); }
inline uint64_t wrValue(uint64_t id) { return id & ((uint64_t{1} << 56) - 1); }

}  // namespace ibdt::messaging
