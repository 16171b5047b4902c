// Connecting to peers: all at create() (eager), or on first use through the
// fabric Listener (lazy; protocol in connection.h); and close().
#include "transport/messaging/connection.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "base/backoff.h"
#include "base/log.h"
#include "transport/messaging/connection_auth.h"
#include "transport/messaging/context_impl.h"

namespace ibdt::messaging {
namespace connection {
namespace {

constexpr uint32_t kMagic = 0x49424443;  // "IBDC"

// magic(4) kind(1) pad(1) addressBytes(2) from(4) to(4) job(8) token(8)
// echo(8), then the address.
struct Fixed {
  uint32_t magic;
  uint8_t kind;
  uint8_t pad;
  uint16_t addressBytes;
  int32_t from;
  int32_t to;
  uint64_t job;
  uint64_t token;
  uint64_t echo;
};

}  // namespace

std::vector<uint8_t> encode(const Datagram& datagram) {
  Fixed fixed{kMagic,       static_cast<uint8_t>(datagram.kind), 0,
              static_cast<uint16_t>(datagram.address.size()),   datagram.from,
              datagram.to,  datagram.job, datagram.token, datagram.echo};
  std::vector<uint8_t> out(sizeof fixed + datagram.address.size());
  std::memcpy(out.data(), &fixed, sizeof fixed);
  std::copy(datagram.address.begin(), datagram.address.end(), out.begin() + sizeof fixed);
  return out;
}

Result<Datagram> decode(std::span<const uint8_t> bytes) {
  Fixed fixed{};
  if (bytes.size() < sizeof fixed) {
    return makeError(Code::kProtocol, "connection datagram of ", bytes.size(), " bytes is too short (", sizeof fixed,
                     " at least)");
  }
  std::memcpy(&fixed, bytes.data(), sizeof fixed);
  if (fixed.magic != kMagic) {
    return makeError(Code::kProtocol, "not a connection datagram (magic 0x", std::hex, fixed.magic, std::dec, ", ",
                     bytes.size(), " bytes)");
  }
  if (fixed.kind < static_cast<uint8_t>(Kind::kRequest) || fixed.kind > static_cast<uint8_t>(Kind::kReady)) {
    return makeError(Code::kProtocol, "connection datagram of unknown kind ", int{fixed.kind});
  }
  if (fixed.pad != 0) return makeError(Code::kProtocol, "connection datagram with a nonzero pad byte");
  if (bytes.size() != sizeof fixed + fixed.addressBytes) {
    return makeError(Code::kProtocol, "connection datagram of ", bytes.size(), " bytes declares a ",
                     fixed.addressBytes, "-byte address (", sizeof fixed + fixed.addressBytes, " bytes in all)");
  }
  Datagram datagram;
  datagram.kind = static_cast<Kind>(fixed.kind);
  datagram.from = fixed.from;
  datagram.to = fixed.to;
  datagram.job = fixed.job;
  datagram.token = fixed.token;
  datagram.echo = fixed.echo;
  datagram.address = bytes.subspan(sizeof fixed);
  return datagram;
}

}  // namespace connection

namespace {

constexpr auto kFirstRetry = std::chrono::milliseconds(20);
constexpr auto kMaxRetry = std::chrono::milliseconds(1000);

// Datagrams handled per progress() call: a peer refilling the listener as
// fast as we empty it must not keep progress() from returning. (Honest
// traffic is a few datagrams per peer; the rest wait for the next call.)
constexpr int kDatagramsPerPoll = 32;

bool sameAddress(const std::vector<uint8_t>& known, std::span<const uint8_t> address) {
  return std::equal(known.begin(), known.end(), address.begin(), address.end());
}

// A link token: nonzero, and not guessable by other processes.
uint64_t newToken() {
  thread_local std::mt19937_64 generator{(uint64_t{std::random_device{}()} << 32) ^ std::random_device{}()};
  uint64_t token = 0;
  while (token == 0) token = generator();
  return token;
}

// A datagram naming `link`'s peer that does not fit (connection.h: dropped,
// no rank failed). Logged as a warning once per link, as a flood of them
// must not flood the log.
void drop(int self, int rank, Link& link, std::string why) {
  if (link.dropped.empty()) {
    IBDT_LOG(kWarn, "messaging: rank ", self, " drops a connection datagram from rank ", rank, ": ", why);
  } else {
    IBDT_LOG(kDebug, "messaging: rank ", self, " drops a connection datagram from rank ", rank, ": ", why);
  }
  link.dropped = std::move(why);
}

}  // namespace

Result<fabric::Endpoint*> ContextImpl::createPeerEndpoint(Peer& peer) {
  auto endpoint = domain_.createEndpoint(*sendQueue_, *recvQueue_, endpointOptions_);
  if (!endpoint.isOk()) return std::move(endpoint).takeStatus().withContext(strCat("endpoint to rank ", peer.rank));
  (*endpoint)->setPeerLabel(strCat("rank ", peer.rank));
  endpoints_.push_back(std::move(endpoint).value());
  return endpoints_.back().get();
}

Status ContextImpl::preparePeer(Peer& peer, fabric::Endpoint& endpoint) {
  if (!peer.self) peer.sendEndpoint = peer.recvEndpoint = &endpoint;
  endpointRank_.set(endpoint.id(), peer.rank);
  IBDT_ASSIGN_OR_RETURN(peer.recvSlots, domain_.allocateMemory(recvDepth_ * slotSize(), fabric::kLocalWrite));
  for (uint32_t slot = 0; slot < recvDepth_; ++slot) IBDT_RETURN_IF_ERROR(repostSlot(peer, slot));
  credits_.reset(peer.rank);
  return Status::ok();
}

Status ContextImpl::connectEager(const Bootstrap& bootstrap) {
  fabric::MeshOptions mesh;
  mesh.endpoint = endpointOptions_;
  mesh.prepare = [this](fabric::Endpoint& endpoint, int rank) {
    return preparePeer(peers_[static_cast<size_t>(rank)], endpoint);
  };
  IBDT_ASSIGN_OR_RETURN(auto endpoints,
                        fabric::connectMesh(domain_, *sendQueue_, *recvQueue_, rank_, size_, bootstrap.allgather, mesh));
  for (auto& endpoint : endpoints) {
    if (endpoint) endpoints_.push_back(std::move(endpoint));
  }
  for (Peer& peer : peers_) {
    if (peer.self) continue;
    peer.link.state = LinkState::kConnected;
    peer.link.remoteReady = true;
    ++counters_.connections;
  }
  return Status::ok();
}

Status ContextImpl::startListening(const Bootstrap& bootstrap) {
  IBDT_ASSIGN_OR_RETURN(listener_, domain_.createListener());
  // A job nonce (rank 0's) keeps datagrams of an earlier Context out.
  uint64_t nonce = std::random_device{}();
  nonce = (nonce << 32) ^ std::random_device{}() ^ static_cast<uint64_t>(rank_);
  auto key = connection::datagramKeyBytes(connection::newDatagramKey());  // rank 0's is the job's (connection_auth.h)
  auto address = listener_->address();
  std::vector<uint8_t> mine(sizeof nonce + key.size() + address.size());
  std::memcpy(mine.data(), &nonce, sizeof nonce);
  std::copy(key.begin(), key.end(), mine.begin() + sizeof nonce);
  std::copy(address.begin(), address.end(), mine.begin() + static_cast<long>(sizeof nonce + key.size()));
  IBDT_ASSIGN_OR_RETURN(auto all, bootstrap.allgather(mine));
  if (all.size() != static_cast<size_t>(size_) || all[0].size() < sizeof nonce) {
    return makeError(Code::kProtocol, "listener address exchange returned ", all.size(), " entries for ", size_,
                     " ranks");
  }
  std::memcpy(&job_, all[0].data(), sizeof job_);
  constexpr size_t kKeyBytes = connection::DatagramKey::kBytes;
  constexpr size_t kHead = sizeof nonce + kKeyBytes;
  for (int p = 0; p < size_; ++p) {
    const auto& entry = all[static_cast<size_t>(p)];
    if (entry.size() <= kHead) return makeError(Code::kProtocol, "rank ", p, " sent no listener address");
    if (p == 0) datagramKey_ = connection::datagramKeyFrom(std::span(entry).subspan<sizeof nonce, kKeyBytes>());
    if (p != rank_) peers_[static_cast<size_t>(p)].link.listenerAddress.assign(entry.begin() + kHead, entry.end());
  }
  return Status::ok();
}

Status ContextImpl::sendDatagram(Peer& peer, connection::Kind kind) {
  std::span<const uint8_t> address;
  std::vector<uint8_t> own;
  if (kind != connection::Kind::kReady) {
    own = peer.sendEndpoint->address();
    address = own;
  }
  connection::Datagram datagram{kind, rank_, peer.rank, job_, 0, 0, address};
  if (kind != connection::Kind::kReady) datagram.token = peer.link.token;
  if (kind != connection::Kind::kRequest) datagram.echo = peer.link.peerToken;
  auto bytes = connection::encode(datagram);
  connection::seal(bytes, datagramKey_);
  if (!peer.link.listener) {
    auto handle = listener_->addPeer(peer.link.listenerAddress);
    if (!handle.isOk()) return std::move(handle).takeStatus().withContext(strCat("the listener of rank ", peer.rank));
    peer.link.listener = *handle;
  }
  Status status = listener_->send(*peer.link.listener, bytes);
  // A full inbox or a lost datagram is retried by the requester's timer.
  if (status.code() == Code::kAgain) return Status::ok();
  return status;
}

Status ContextImpl::connectAndFlush(Peer& peer) {
  if (peer.link.ready()) return flushControl(peer);
  if (peer.link.state != LinkState::kIdle) return Status::ok();  // queued until it is up
  // A request we could not connect to may have left an endpoint: reuse it.
  if (peer.sendEndpoint == nullptr) {
    IBDT_ASSIGN_OR_RETURN(fabric::Endpoint * endpoint, createPeerEndpoint(peer));
    IBDT_RETURN_IF_ERROR(preparePeer(peer, *endpoint));
  }
  peer.link.state = LinkState::kRequested;
  peer.link.token = newToken();
  peer.link.deadline = Deadline::after(std::chrono::milliseconds(options_.connectTimeoutMs));
  peer.link.interval = kFirstRetry;
  peer.link.nextRequest = std::chrono::steady_clock::now() + peer.link.interval;
  ++requesting_;
  IBDT_LOG(kDebug, "messaging: rank ", rank_, " requests a connection to rank ", peer.rank);
  Status status = sendDatagram(peer, connection::Kind::kRequest);
  // A dead peer fails what was queued for it (the caller's request), not the call.
  if (!status.isOk()) failPeer(peer, status.withContext(strCat("connecting to rank ", peer.rank)));
  return Status::ok();
}

Status ContextImpl::linkUp(Peer& peer, std::span<const uint8_t> address, bool remoteReady) {
  IBDT_RETURN_IF_ERROR(peer.sendEndpoint->connect(address).withContext(strCat("connecting to rank ", peer.rank)));
  if (peer.link.state == LinkState::kRequested) --requesting_;
  peer.link.state = LinkState::kConnected;
  peer.link.remoteReady = remoteReady;
  peer.link.remoteAddress.assign(address.begin(), address.end());
  ++counters_.connections;
  IBDT_LOG(kDebug, "messaging: rank ", rank_, " connected to rank ", peer.rank);
  return Status::ok();
}

// Answers the request of `peer` (its token already in link.peerToken). An
// address the provider refuses drops the request (connection.h); only our
// own failures are returned.
Status ContextImpl::accept(Peer& peer, std::span<const uint8_t> address) {
  // An earlier request whose address we could not connect to left its
  // endpoint: reuse it, so that bad requests cost nothing per datagram.
  if (peer.sendEndpoint == nullptr) {
    IBDT_ASSIGN_OR_RETURN(fabric::Endpoint * endpoint, createPeerEndpoint(peer));
    IBDT_RETURN_IF_ERROR(preparePeer(peer, *endpoint));
  }
  Status connected = linkUp(peer, address, /*remoteReady=*/false);
  if (!connected.isOk()) {
    drop(rank_, peer.rank, peer.link, strCat("a request with an address we cannot connect to (", connected.message(), ")"));
    return Status::ok();
  }
  if (peer.link.token == 0) peer.link.token = newToken();
  peer.link.deadline = Deadline::after(std::chrono::milliseconds(options_.connectTimeoutMs));  // half open until then
  return sendDatagram(peer, connection::Kind::kAccept);
}

Status ContextImpl::handleDatagram(std::span<const uint8_t> bytes) {
  auto body = connection::unseal(bytes, datagramKey_);
  auto datagram = body.isOk() ? connection::decode(*body) : Result<connection::Datagram>(body.status());
  if (!datagram.isOk()) {
    std::string line = strCat("messaging: rank ", rank_, " drops a datagram: ", datagram.status().toString());
    log::once(log::Level::kWarn, "connection-datagram-malformed", line + " (more are logged at debug level)");
    IBDT_LOG(kDebug, line);
    return Status::ok();
  }
  if (datagram->job != job_ || datagram->to != rank_ || datagram->from < 0 || datagram->from >= size_ ||
      datagram->from == rank_) {
    IBDT_LOG(kDebug, "messaging: rank ", rank_, " drops a stale or misdirected connection datagram (job 0x", std::hex,
             datagram->job, std::dec, ", from ", datagram->from, " to ", datagram->to, ")");
    return Status::ok();
  }
  Peer& peer = peers_[static_cast<size_t>(datagram->from)];
  Link& link = peer.link;
  if (!peer.failure.isOk()) return Status::ok();
  Status status;      // our own failure (endpoint, listener): fails the peer
  std::string misfit;  // the datagram does not fit the link: dropped
  switch (datagram->kind) {
    case connection::Kind::kRequest:
      if (link.state == LinkState::kConnected) {
        // A repeat: our answer was lost or is still on its way. Anything
        // else leaves the link (and what is in flight on it) alone.
        if (!sameAddress(link.remoteAddress, datagram->address) || datagram->token != link.peerToken) {
          misfit = "a request for a second link (the one we have stays)";
        } else if (!link.remoteReady) {
          status = sendDatagram(peer, connection::Kind::kAccept);
        }
      } else if (link.state == LinkState::kIdle || rank_ > peer.rank) {
        // Crossed requests: the lower rank's wins; we reuse our endpoint.
        link.peerToken = datagram->token;
        status = accept(peer, datagram->address);
      }
      break;
    case connection::Kind::kAccept:
      if (link.state == LinkState::kIdle) {
        misfit = "an accept for a connection we never requested";
      } else if (link.state == LinkState::kRequested && datagram->echo != link.token) {
        misfit = "an accept that does not answer our request";
      } else if (link.state == LinkState::kRequested) {
        Status connected = linkUp(peer, datagram->address, /*remoteReady=*/true);
        if (!connected.isOk()) {
          misfit = strCat("an accept with an address we cannot connect to (", connected.message(), ")");
          break;
        }
        link.peerToken = datagram->token;
        status = sendDatagram(peer, connection::Kind::kReady);
        if (status.isOk()) status = flushControl(peer);
      } else if (!sameAddress(link.remoteAddress, datagram->address)) {
        misfit = "an accept for a second link (the one we have stays)";
      }
      break;
    case connection::Kind::kReady:
      if (link.state != LinkState::kConnected) {
        misfit = "a ready before any accept";
      } else if (!link.remoteReady && datagram->echo != link.token) {
        misfit = "a ready that does not answer our accept";
      } else if (!link.remoteReady) {
        link.remoteReady = true;
        status = flushControl(peer);
      }
      break;
  }
  if (!misfit.empty()) drop(rank_, peer.rank, link, std::move(misfit));
  if (!status.isOk()) failPeer(peer, status);
  return Status::ok();
}

Status ContextImpl::retryRequests() {
  auto now = std::chrono::steady_clock::now();
  for (Peer& peer : peers_) {
    Link& link = peer.link;
    if (link.state != LinkState::kRequested || !peer.failure.isOk() || now < link.nextRequest) continue;
    Status status;
    if (link.deadline.expired()) {
      status = makeError(Code::kPeerFailed, "rank ", peer.rank, " did not answer the connection request within ",
                         options_.connectTimeoutMs, " ms (IBDT_MSG_CONNECT_TIMEOUT_MS)",
                         link.dropped.empty() ? "" : "; dropped from it: ", link.dropped);
    } else {
      link.interval = std::min<std::chrono::milliseconds>(2 * link.interval, kMaxRetry);
      link.nextRequest = now + link.interval;
      status = sendDatagram(peer, connection::Kind::kRequest);
    }
    if (!status.isOk()) failPeer(peer, status.withContext(strCat("connecting to rank ", peer.rank)));
  }
  return Status::ok();
}

Status ContextImpl::pollConnections() {
  for (int handled = 0; handled < kDatagramsPerPoll; ++handled) {
    IBDT_ASSIGN_OR_RETURN(bool got, listener_->receive(datagram_));
    if (!got) break;
    ++events_;
    IBDT_RETURN_IF_ERROR(handleDatagram(datagram_));
  }
  expireHalfOpenLinks();
  return requesting_ > 0 ? retryRequests() : Status::ok();
}

// --- close ---

bool ContextImpl::quietToward(const Peer& peer) const {
  if (!peer.controlQueue.empty() || !peer.activeSends.empty() || !peer.activeReads.empty() ||
      peer.sendOutstanding != 0) {
    return false;
  }
  for (const auto& entry : sendTransfers_) {
    if (entry.second->op->peer == peer.rank) return false;
  }
  for (const auto& entry : recvTransfers_) {
    if (entry.second->op->peer == peer.rank) return false;
  }
  return true;
}

Status ContextImpl::sendClose(Peer& peer) {
  if (freeSendSlots_.empty()) return Status::ok();  // next round
  PendingControl message;
  message.bytes.resize(sizeof(wire::Header));
  wire::write(message.bytes.data(), 0, wire::Header{wire::Kind::kClose, {}, 0});
  IBDT_RETURN_IF_ERROR(postControl(peer, message, /*useReserve=*/true));
  peer.link.closeSent = true;
  return Status::ok();
}

Status ContextImpl::handleClose(Peer& peer) {
  // A peer closes once quiet toward us (quietToward): no part of a message
  // or of a transfer it takes part in may still be owed. (A send of ours it
  // never answered is its application's error, not the protocol's.)
  if (peer.inbound.active) {
    return makeError(Code::kProtocol, "rank ", peer.rank, " closed at byte ", peer.inbound.received, " of its ",
                     peer.inbound.envelope.bytes, "-byte pipelined message");
  }
  for (const auto& [id, transfer] : recvTransfers_) {
    if (transfer->op->peer == peer.rank) {
      return makeError(Code::kProtocol, "rank ", peer.rank, " closed before finishing transfer ", id, " to us");
    }
  }
  for (const auto& [id, transfer] : sendTransfers_) {
    // Writes all posted may have reached it before their completions reach us.
    bool owed = transfer->waitingForFin || (transfer->replied && transfer->next < transfer->cts.bytes);
    if (transfer->op->peer == peer.rank && owed) {
      return makeError(Code::kProtocol, "rank ", peer.rank, " closed before finishing transfer ", id, " from us");
    }
  }
  peer.link.closeReceived = true;
  return Status::ok();
}

Status ContextImpl::close(Deadline deadline) {
  if (closed_) return Status::ok();
  Backoff backoff(spins_);
  for (;;) {
    uint64_t before = events_;
    IBDT_RETURN_IF_ERROR(progress());
    bool done = true;
    for (Peer& peer : peers_) {
      if (!peer.failure.isOk() || peer.link.state == LinkState::kIdle) continue;
      if (peer.self) {
        done = done && quietToward(peer);
        continue;
      }
      if (!peer.link.closeSent && peer.link.ready() && quietToward(peer)) {
        Status status = sendClose(peer);
        if (!status.isOk()) failPeer(peer, status);
      }
      // Our "nothing more" has left (its send completed) and theirs arrived.
      bool finished = peer.link.closeSent && peer.sendOutstanding == 0 && peer.link.closeReceived;
      done = done && (finished || !peer.failure.isOk());
    }
    if (done) break;
    if (deadline.expired()) {
      int waiting = 0;
      for (const Peer& peer : peers_) {
        if (!peer.self && peer.failure.isOk() && peer.link.state != LinkState::kIdle && !peer.link.closeReceived) {
          waiting = peer.rank;
          break;
        }
      }
      return makeError(Code::kTimeout, "close: rank ", rank_, " is still exchanging with its peers (e.g. rank ",
                       waiting, ")");
    }
    if (events_ != before) backoff.reset();
    else backoff.pause();
  }
  // Receives no message will match any more.
  std::vector<Operation*> left;
  posted_.forEach([&](Operation& op) { left.push_back(&op); });
  for (Operation* op : left) {
    std::shared_ptr<Operation> owner = unpostReceive(*op);  // keeps it alive while it completes
    complete(*op, makeError(Code::kCancelled, "receive still posted when the context closed"));
  }
  closed_ = true;
  return Status::ok();
}

}  // namespace ibdt::messaging
