// collectives/poison.h — what a failed run sends in place of data, and how
// a receive recognises it (docs/alltoall-bruck.md, "Errors").
//
// Plans that forward blocks through other ranks (Bruck, the hierarchical
// alltoall's gather, leader exchange and scatter, the small collectives'
// allgather and broadcast) must not forward stale data once their run has
// failed: ranks further along would complete "successfully" with wrong
// blocks. Such a run sends every later message as a poison: a short message
// of the odd signature {bool, long double, bool}. A receive expecting
// nothing truncates on it; a receive expecting data fails on its signature
// or gets fewer bytes than due (receivedAll). The one escape is a message
// whose signature is exactly that sequence.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ibdt/datatype.h"
#include "ibdt/messaging.h"
#include "ibdt/status.h"

namespace ibdt::collectives {

// A plan's poison: persistent sends of it are made at init (a run only
// starts them). Its address must stay put while the plan lives.
class Poison {
 public:
  Result<messaging::Request> sendInit(messaging::Context& ctx, int contextRank, int32_t tag, uint32_t communicator);
  int64_t bytes() const { return type_.valid() ? type_.size() : 0; }

 private:
  datatype::Datatype type_;
  alignas(16) std::byte payload_[48] = {};
};

// kPeerFailed naming `from` when a receive that completed got fewer than
// `due` bytes: `from` sent the poison.
Status receivedAll(const messaging::RecvInfo& info, int64_t due, int from);

}  // namespace ibdt::collectives
