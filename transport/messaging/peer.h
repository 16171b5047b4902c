// transport/messaging/peer.h — what the core keeps per peer: its endpoints
// and receive buffers, its control queue, the transfers with work left, the
// pipelined message arriving from it and its layout caches.
#pragma once

#include <deque>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ibdt/fabric.h"
#include "transport/messaging/layout_cache.h"
#include "transport/messaging/operation.h"

namespace ibdt::messaging {

// A pipelined eager message a peer is sending us: its fragments arrive in
// order and nothing else that starts a message comes before the last.
struct InboundMessage {
  bool active = false;
  wire::Envelope envelope{};
  int64_t received = 0;              // packed bytes arrived
  std::shared_ptr<Operation> op;     // its receive; null while unexpected
  Unexpected* unexpected = nullptr;  // queued until a receive takes it over
  // A receive that failed (signature, unpack) still completes only with the
  // last fragment: like any receive it returns once the message is consumed,
  // so its peer's send can finish.
  Status failure;
};

// A queued control message: prebuilt bytes, or an eager send packed at flush.
// A pipelined one stays at the head of the queue until its last fragment left.
struct PendingControl {
  std::vector<uint8_t> bytes;
  std::shared_ptr<Operation> eager;
  bool pipelined = false;
  bool gather = false;  // pipelined: fragments gather the user blocks (no pack)
  int64_t next = 0;     // pipelined: packed bytes already sent
};

struct Peer {
  int rank = 0;
  bool self = false;
  fabric::Endpoint* sendEndpoint = nullptr;
  fabric::Endpoint* recvEndpoint = nullptr;
  std::unique_ptr<fabric::MemoryRegion> recvSlots;
  uint32_t sendOutstanding = 0;
  uint32_t readsOutstanding = 0;
  std::deque<PendingControl> controlQueue;
  std::deque<uint32_t> activeSends;  // transfers with data left to post
  std::deque<uint32_t> activeReads;  // P-RRS receives with reads left to post
  Status failure;                    // set once the endpoint broke
  InboundMessage inbound;            // pipelined eager message arriving
  LayoutCache layouts;               // Section 4.4.2, both halves
};

}  // namespace ibdt::messaging
