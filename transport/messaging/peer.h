// transport/messaging/peer.h — what the core keeps per peer: its endpoints
// and receive buffers, the queue of what waits to go to it, the pipelined
// message arriving from it and its layout caches.
#pragma once

#include <deque>
#include <memory>
#include <vector>

#include "ibdt/fabric.h"
#include "transport/messaging/control_queue.h"
#include "transport/messaging/layout_cache.h"
#include "transport/messaging/pipelined_inbound.h"

namespace ibdt::messaging {

struct Peer {
  int rank = 0;
  bool self = false;
  fabric::Endpoint* sendEndpoint = nullptr;
  fabric::Endpoint* recvEndpoint = nullptr;
  std::unique_ptr<fabric::MemoryRegion> recvSlots;
  uint32_t sendOutstanding = 0;
  uint32_t readsOutstanding = 0;  // P-RRS reads, within the provider's reads in flight
  ControlQueue control;              // control messages and eager sends, in order
  Status failure;                    // set once the endpoint broke
  PipelinedInbound inbound;          // pipelined eager message arriving
  LayoutCache layouts;               // Section 4.4.2, both halves
};

}  // namespace ibdt::messaging
