// transport/messaging/operation.h — a user send or receive, and a message
// that arrived before its receive was posted.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "ibdt/messaging.h"
#include "transport/messaging/match_list.h"
#include "transport/messaging/type_cache.h"
#include "transport/messaging/user_registration.h"
#include "transport/messaging/wire.h"

namespace ibdt::messaging {

struct OneSidedChannel;  // one_sided.h

// A user send or receive. Every member needs an initialiser: operations
// are default-initialised (newOperation in context.cc).
struct Operation : MatchListHook {
  bool isSend = false;
  const void* sendBuffer = nullptr;
  void* recvBuffer = nullptr;
  int64_t count = 0;
  datatype::Datatype type;
  std::optional<datatype::Segment> segment;
  // A receive's signature (count x type), found when it is posted so that
  // an eager arrival's check does not look it up; unset if it failed.
  std::optional<datatype::Signature> signature;
  datatype::Stats stats;  // valid once ensureStats() succeeded
  bool statsKnown = false;
  int peer = 0;    // destination (send) or source once matched (recv)
  MatchSpec spec;  // receive: what it accepts
  int tag = 0;     // send
  uint32_t communicator = 0;
  int64_t bytes = 0;  // packed bytes (send) or capacity (receive)
  bool done = false;
  Status status;
  RecvInfo info;
  // A posted receive owns itself (the caller may drop its Request) until it
  // is matched, cancelled or failed.
  std::shared_ptr<Operation> postedSelf;
  // A one-sided put or exposure (one_sided.h): its registration and keys.
  std::shared_ptr<OneSidedChannel> oneSided;

  // Block statistics feed only the rendezvous decision, so an eager message
  // never pays for them: computed on first use.
  Status ensureStats(TypeCache& types) {
    if (statsKnown) return Status::ok();
    IBDT_ASSIGN_OR_RETURN(stats, types.stats(type, count));
    statsKnown = true;
    return Status::ok();
  }
};

// Marks `op` complete with `status` (what wait/test report).
inline void completeOperation(Operation& op, Status status) {
  op.done = true;
  op.status = std::move(status);
}

// A message that arrived before its receive was posted.
struct Unexpected : MatchListHook {
  Envelope envelope;
  int peer = 0;
  wire::Envelope wireEnvelope{};
  wire::Kind kind = wire::Kind::kEager;  // kEager, kPipelined or kRts
  std::vector<uint8_t> payload;          // eager; a pipelined one may still be arriving
  wire::Rts rts{};                       // rendezvous
  size_t heldBytes = 0;                  // counted in Matching (matching.h)
};

}  // namespace ibdt::messaging
