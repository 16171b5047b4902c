// transport/fabric/shared_receives.h — an optional provider feature: one
// receive queue shared by every endpoint whose receives complete on a given
// completion queue (a verbs SRQ). postRecv() on any of those endpoints then
// feeds all of them, a receive is consumed by whichever endpoint a message
// arrives on (Completion::endpointId names it), and a receive posted through
// an endpoint in the error state still feeds the others.
//
// Internal, not part of include/ibdt/fabric.h (a field there would recompile
// every file of the library): a Domain that has the feature also derives
// from SharedReceiveDomain. The messaging layer uses it above
// IBDT_MSG_SRQ_RANKS ranks (docs/many-ranks.md).
#pragma once

#include <cstdint>

#include "ibdt/fabric.h"

namespace ibdt::fabric {

struct SharedReceiveSupport {
  bool available = false;  // shareReceives() can be asked for
  bool always = false;     // every receive CQ shares one anyway (verbs: IBDT_VERBS_SRQ=1)
  uint32_t maxDepth = 0;   // receives one shared queue can hold
};

class SharedReceiveDomain {
 public:
  virtual ~SharedReceiveDomain() = default;
  virtual SharedReceiveSupport sharedReceiveSupport() const = 0;
  // From now on the endpoints created with `recvQueue` (of this domain) as
  // their receive completion queue share one receive queue of `depth`
  // receives. Call before the first such endpoint is created.
  virtual Status shareReceives(CompletionQueue& recvQueue, uint32_t depth) = 0;
};

inline SharedReceiveSupport sharedReceiveSupport(const Domain& domain) {
  const auto* shared = dynamic_cast<const SharedReceiveDomain*>(&domain);
  return shared != nullptr ? shared->sharedReceiveSupport() : SharedReceiveSupport{};
}

// kUnsupported where the provider has no shared receive queue (shm).
inline Status shareReceives(Domain& domain, CompletionQueue& recvQueue, uint32_t depth) {
  auto* shared = dynamic_cast<SharedReceiveDomain*>(&domain);
  if (shared == nullptr) {
    return makeError(Code::kUnsupported, "provider ", domain.caps().provider, " has no shared receive queue");
  }
  return shared->shareReceives(recvQueue, depth);
}

}  // namespace ibdt::fabric
