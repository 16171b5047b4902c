// transport/messaging/connection.h — how a Context connects to a peer on
// demand (Options::connect lazy): the per-peer link state and the
// datagrams exchanged through the fabric Listener.
//
// Protocol (connections.cc). The requester creates its endpoint, posts its
// eager receive buffers and sends kRequest(its endpoint address) to the
// peer's listener, repeating it with backoff until answered (datagrams may
// be lost). The acceptor creates (or reuses) its endpoint, posts its
// buffers, connects it to the requester's and answers kAccept(its address);
// it sends only once the requester is known to be connected too (kReady, or
// any message from it), as an RC queue pair drops what arrives before it is
// ready to receive. The requester connects and sends kReady. Crossed
// requests: the higher rank accepts the lower rank's request with the
// endpoint it created for its own; the lower rank ignores the higher's.
// Every step is idempotent, so repeated datagrams only repeat answers.
//
// Untrusted datagrams. Any process that can reach the listener can send
// one, claiming any rank. So a datagram that does not fit the link's state
// (an accept nobody asked for, a second endpoint for a connected rank, an
// address the provider refuses) is dropped and fails no rank: failing the
// rank it names would let a forgery cut a link it does not own. Why it was
// dropped is kept on the link and told if that connection then times out.
// Each side's token for the link travels in its request or accept and must
// come back in the answer (kAccept echoes the request's, kReady the
// accept's), so only a process that saw the request can accept it. Every
// datagram is sealed with a MAC under the job's key (connection_auth.h), so
// only a member of the job can send one that is parsed at all. What
// remains: a member's forged request for a rank we have no link with yet
// takes that link (half open), and the rank it named then times out
// connecting to us; a half-open link fails its rank after the connect
// timeout (half_open.cc), so what we queue for it does not wait forever.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ibdt/deadline.h"
#include "ibdt/status.h"

namespace ibdt::messaging {

enum class LinkState : uint8_t {
  kIdle,       // no endpoint to this peer
  kRequested,  // our endpoint exists, our request is unanswered
  kConnected,  // endpoint pair up (the acceptor may still wait for kReady)
};

struct Link {
  LinkState state = LinkState::kIdle;
  bool remoteReady = false;           // the peer's side is connected: we may send
  // The peer's listener: its address from create(), resolved at first use
  // (a rank that never talks to it never maps it, and may be gone by then).
  std::vector<uint8_t> listenerAddress;
  std::optional<uint32_t> listener;   // fabric::Listener handle once resolved
  std::vector<uint8_t> remoteAddress;  // the peer endpoint we connected to
  Deadline deadline = Deadline::never();  // requester: give up after this
  uint64_t token = 0;      // ours, sent in our request or accept; the answer must echo it
  uint64_t peerToken = 0;  // theirs, from their request or accept; echoed in our answer
  std::string dropped;     // why the last datagram naming this peer was dropped
  std::chrono::steady_clock::time_point nextRequest{};
  std::chrono::milliseconds interval{0};
  // close(): our "nothing more" sent (and its send completed), and theirs received.
  bool closeSent = false;
  bool closeReceived = false;

  bool ready() const { return state == LinkState::kConnected && remoteReady; }
};

namespace connection {

enum class Kind : uint8_t { kRequest = 1, kAccept = 2, kReady = 3 };

struct Datagram {
  Kind kind = Kind::kRequest;
  int32_t from = 0;
  int32_t to = 0;
  uint64_t job = 0;                // this Context's job nonce (stale datagrams are dropped)
  uint64_t token = 0;              // the sender's link token (request, accept)
  uint64_t echo = 0;               // the token it answers (accept, ready)
  std::span<const uint8_t> address;  // endpoint address (request, accept)
};

std::vector<uint8_t> encode(const Datagram& datagram);
// kProtocol when the bytes are not a datagram of this protocol.
Result<Datagram> decode(std::span<const uint8_t> bytes);

}  // namespace connection
}  // namespace ibdt::messaging
