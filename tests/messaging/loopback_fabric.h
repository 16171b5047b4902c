// tests/messaging/loopback_fabric.h — an in-process fabric for messaging
// tests that run ranks as threads (Gloo style: fast, deterministic).
//
// It follows fabric.h's RC rules strictly so that protocol bugs show: every
// one-sided access is checked against a registered region (rkey, bounds,
// access flags); requests of an endpoint execute in order, and one that
// needs a receive (SEND, WRITE_WITH_IMM) waits for the peer to post one,
// holding back everything behind it; a failed request moves the endpoint to
// the error state and flushes the rest. Payloads are gathered at post time.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>

#include "ibdt/fabric.h"

namespace ibdt::messaging::testing {

class LoopbackWorld;

// Creates a Domain attached to `world`; one per simulated rank.
std::unique_ptr<fabric::Domain> openLoopbackDomain(std::shared_ptr<LoopbackWorld> world, fabric::Caps caps);
// `sharedReceives`: its domains offer a receive queue shared by the
// endpoints of a completion queue (transport/fabric/shared_receives.h), as
// a verbs SRQ: a SEND takes whichever receive is at its head. With
// LOOPBACK_SHARED_RECEIVES=1 every world offers them and every Context must
// use them (as IBDT_VERBS_SRQ=1 on verbs).
std::shared_ptr<LoopbackWorld> makeLoopbackWorld(bool sharedReceives = false);
struct SharedReceiveStats {
  uint64_t queues = 0;      // completion queues whose endpoints share one receive queue
  uint64_t foundEmpty = 0;  // a SEND found its shared queue empty and waited (an RNR retry on a device)
  // The fewest receives any shared queue held right after one was taken
  // (UINT64_MAX: none taken): a queue sized exactly for what its senders may
  // have in flight goes down to its size minus that, never lower.
  uint64_t lowWater = UINT64_MAX;
};
SharedReceiveStats sharedReceiveStats(LoopbackWorld& world);
// Marks `domain` (a loopback domain) as killed: from now on, each of its
// endpoints that is destroyed fails its peer's outstanding requests and
// posted receives, as a dead process's would (an orderly close does not).
void killLoopbackDomain(fabric::Domain& domain);
// Default caps: small max_sge so gathers span several requests.
fabric::Caps loopbackCaps();

}  // namespace ibdt::messaging::testing
