// transport/messaging/protocol_services.h — the core's services to the
// rendezvous protocol objects.
#pragma once

#include <span>
#include <vector>

#include "ibdt/fabric.h"
#include "transport/messaging/operation.h"
#include "transport/messaging/staging.h"

namespace ibdt::messaging {

// What the protocol objects (send_protocol.h, recv_protocol.h) need from
// the core: memory to register or stage in, credits, the control queue and
// the layout caches (Section 4.4.2).
class ProtocolServices {
 public:
  virtual ~ProtocolServices() = default;
  virtual Result<UserRegistration> registerUser(const Operation& op, int64_t bytes, uint32_t access, bool single) = 0;
  // A pool buffer; `keyForRank` (or -1): the rank its key will be given to,
  // so the key works for that rank only where the provider can (memory::BufferPool::get).
  virtual Result<Staging> pooledBuffer(size_t bytes, int keyForRank) = 0;
  virtual Result<Staging> dedicatedBuffer(size_t bytes) = 0;
  virtual bool creditFree(int rank) const = 0;
  virtual void queueControl(int rank, std::vector<uint8_t> bytes) = 0;
  // The receiver's layout for a zero-copy reply to a noncontiguous receive:
  // sent with it (`layout`) or cached from an earlier one (Section 4.4.2).
  virtual Result<datatype::Segment> receiverLayout(int rank, const wire::Cts& cts, std::span<const uint8_t> layout) = 0;
  // Receiver side of that cache: whether `rank` holds this version of our
  // type (`type`), and noting that a reply now carries it.
  virtual bool layoutCached(int rank, const datatype::Datatype& type) const = 0;
  virtual void layoutSent(int rank, const datatype::Datatype& type) = 0;
  // The largest control message (header included).
  virtual size_t controlCapacity() const = 0;
};

}  // namespace ibdt::messaging
