// transport/messaging/connections.h — the links of a Context to its peers:
// their state, the lazy handshake through the fabric Listener (protocol,
// tokens and authentication in connection.h), request retries and the
// half-open deadline. The core owns the endpoints and the queues; it hears
// from Connections only through Host (an endpoint wanted, a link ready, a
// peer failed), so the two never call into each other's files both ways.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "ibdt/fabric.h"
#include "ibdt/messaging.h"
#include "transport/messaging/connection.h"
#include "transport/messaging/connection_auth.h"

namespace ibdt::messaging {

class Connections {
 public:
  // What Connections needs from the core.
  class Host {
   public:
    virtual ~Host() = default;
    // The endpoint toward `rank`, created (receive buffers posted) at first use.
    virtual Result<fabric::Endpoint*> endpointTo(int rank) = 0;
    // The link to `rank` now carries messages: send what waited for it.
    virtual Status linkReady(int rank) = 0;
    virtual bool peerFailed(int rank) const = 0;
    virtual void failPeer(int rank, Status status) = 0;
  };

  Connections(Host& host, Counters& counters) : host_(host), counters_(counters) {}
  void init(int rank, int size, int connectTimeoutMs);

  // A link that is up from the start (eager mesh, or the pair to ourselves).
  void markConnected(int rank, bool counted);
  // Lazy: creates our listener and exchanges listener addresses, the job
  // nonce and the datagram key through the bootstrap.
  Status listen(fabric::Domain& domain, const Bootstrap& bootstrap);
  bool listening() const { return listener_ != nullptr; }

  // Starts connecting to `rank` if its link is idle; a dead peer fails what
  // was queued for it (through Host), not the call.
  Status request(int rank);
  // Handles datagrams that arrived, retries unanswered requests and fails
  // half-open links past their deadline. `events` counts datagrams handled.
  Status poll(uint64_t& events);

  const Link& link(int rank) const { return links_[static_cast<size_t>(rank)]; }
  bool ready(int rank) const { return link(rank).ready(); }
  // A message arrived from `rank`, so its side is connected.
  void heardFrom(int rank) { at(rank).remoteReady = true; }
  void markCloseSent(int rank) { at(rank).closeSent = true; }
  void markCloseReceived(int rank) { at(rank).closeReceived = true; }
  // `rank` failed: a request out to it is over.
  void peerFailed(int rank);

 private:
  Link& at(int rank) { return links_[static_cast<size_t>(rank)]; }
  Status sendDatagram(int rank, connection::Kind kind);
  Status linkUp(int rank, std::span<const uint8_t> address, bool remoteReady);
  Status accept(int rank, std::span<const uint8_t> address);
  Status handleDatagram(std::span<const uint8_t> bytes);
  // The steps of handleDatagram, one per kind: `misfit` says why a datagram
  // that does not fit the link is dropped; the Status is our own failure.
  Status onRequest(int rank, const connection::Datagram& datagram, std::string& misfit);
  Status onAccept(int rank, const connection::Datagram& datagram, std::string& misfit);
  Status onReady(int rank, const connection::Datagram& datagram, std::string& misfit);
  void retryRequests();
  void expireHalfOpenLinks();  // half_open.cc
  void drop(int rank, std::string why);

  Host& host_;
  Counters& counters_;
  int rank_ = 0;
  int size_ = 1;
  int connectTimeoutMs_ = 0;
  std::vector<Link> links_;
  std::unique_ptr<fabric::Listener> listener_;
  uint64_t job_ = 0;                     // the job nonce (rank 0's): stale datagrams are dropped
  connection::DatagramKey datagramKey_;  // rank 0's, authenticates every datagram
  std::chrono::steady_clock::time_point nextHalfOpenCheck_{};
  uint32_t requesting_ = 0;  // links in kRequested
  std::vector<uint8_t> datagram_;
};

}  // namespace ibdt::messaging
