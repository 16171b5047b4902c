// Connecting to peers on first use through the fabric Listener (protocol
// in connection.h): requests and their retries, accepts, readiness.
#include "transport/messaging/connections.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "base/log.h"

namespace ibdt::messaging {
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

}  // namespace

void Connections::init(int rank, int size, int connectTimeoutMs) {
  rank_ = rank;
  size_ = size;
  connectTimeoutMs_ = connectTimeoutMs;
  links_.assign(static_cast<size_t>(size), Link{});
}

void Connections::markConnected(int rank, bool counted) {
  Link& link = at(rank);
  link.state = LinkState::kConnected;
  link.remoteReady = true;
  if (counted) ++counters_.connections;
}

void Connections::peerFailed(int rank) {
  Link& link = at(rank);
  if (link.state != LinkState::kRequested) return;
  link.state = LinkState::kIdle;
  --requesting_;
}

// A datagram naming `rank` that does not fit (connection.h: dropped, no
// rank failed). Logged as a warning once per link, as a flood of them must
// not flood the log.
void Connections::drop(int rank, std::string why) {
  Link& link = at(rank);
  if (link.dropped.empty()) {
    IBDT_LOG(kWarn, "messaging: rank ", rank_, " drops a connection datagram from rank ", rank, ": ", why);
  } else {
    IBDT_LOG(kDebug, "messaging: rank ", rank_, " drops a connection datagram from rank ", rank, ": ", why);
  }
  link.dropped = std::move(why);
}

Status Connections::listen(fabric::Domain& domain, const Bootstrap& bootstrap) {
  IBDT_ASSIGN_OR_RETURN(listener_, domain.createListener());
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
    if (p != rank_) at(p).listenerAddress.assign(entry.begin() + kHead, entry.end());
  }
  return Status::ok();
}

Status Connections::sendDatagram(int rank, connection::Kind kind) {
  Link& link = at(rank);
  std::span<const uint8_t> address;
  std::vector<uint8_t> own;
  if (kind != connection::Kind::kReady) {
    IBDT_ASSIGN_OR_RETURN(fabric::Endpoint * endpoint, host_.endpointTo(rank));
    own = endpoint->address();
    address = own;
  }
  connection::Datagram datagram{kind, rank_, rank, job_, 0, 0, address};
  if (kind != connection::Kind::kReady) datagram.token = link.token;
  if (kind != connection::Kind::kRequest) datagram.echo = link.peerToken;
  auto bytes = connection::encode(datagram);
  connection::seal(bytes, datagramKey_);
  if (!link.listener) {
    auto handle = listener_->addPeer(link.listenerAddress);
    if (!handle.isOk()) return std::move(handle).takeStatus().withContext(strCat("the listener of rank ", rank));
    link.listener = *handle;
  }
  Status status = listener_->send(*link.listener, bytes);
  // A full inbox or a lost datagram is retried by the requester's timer.
  if (status.code() == Code::kAgain) return Status::ok();
  return status;
}

Status Connections::request(int rank) {
  Link& link = at(rank);
  if (link.state != LinkState::kIdle) return Status::ok();  // queued until it is up
  // A request we could not connect to may have left an endpoint: the host reuses it.
  IBDT_RETURN_IF_ERROR(host_.endpointTo(rank).status());
  link.state = LinkState::kRequested;
  link.token = newToken();
  link.deadline = Deadline::after(std::chrono::milliseconds(connectTimeoutMs_));
  link.interval = kFirstRetry;
  link.nextRequest = std::chrono::steady_clock::now() + link.interval;
  ++requesting_;
  IBDT_LOG(kDebug, "messaging: rank ", rank_, " requests a connection to rank ", rank);
  Status status = sendDatagram(rank, connection::Kind::kRequest);
  if (!status.isOk()) host_.failPeer(rank, status.withContext(strCat("connecting to rank ", rank)));
  return Status::ok();
}

Status Connections::linkUp(int rank, std::span<const uint8_t> address, bool remoteReady) {
  IBDT_ASSIGN_OR_RETURN(fabric::Endpoint * endpoint, host_.endpointTo(rank));
  IBDT_RETURN_IF_ERROR(endpoint->connect(address).withContext(strCat("connecting to rank ", rank)));
  Link& link = at(rank);
  if (link.state == LinkState::kRequested) --requesting_;
  link.state = LinkState::kConnected;
  link.remoteReady = remoteReady;
  link.remoteAddress.assign(address.begin(), address.end());
  ++counters_.connections;
  IBDT_LOG(kDebug, "messaging: rank ", rank_, " connected to rank ", rank);
  return Status::ok();
}

// Answers the request of `rank` (its token already in link.peerToken). An
// address the provider refuses drops the request (connection.h); only our
// own failures are returned. An earlier request whose address we could not
// connect to left its endpoint: the host reuses it, so that bad requests
// cost nothing per datagram.
Status Connections::accept(int rank, std::span<const uint8_t> address) {
  IBDT_RETURN_IF_ERROR(host_.endpointTo(rank).status());
  Status connected = linkUp(rank, address, /*remoteReady=*/false);
  if (!connected.isOk()) {
    drop(rank, strCat("a request with an address we cannot connect to (", connected.message(), ")"));
    return Status::ok();
  }
  Link& link = at(rank);
  if (link.token == 0) link.token = newToken();
  link.deadline = Deadline::after(std::chrono::milliseconds(connectTimeoutMs_));  // half open until then
  return sendDatagram(rank, connection::Kind::kAccept);
}

Status Connections::onRequest(int rank, const connection::Datagram& datagram, std::string& misfit) {
  Link& link = at(rank);
  if (link.state == LinkState::kConnected) {
    // A repeat: our answer was lost or is still on its way. Anything else
    // leaves the link (and what is in flight on it) alone.
    if (!sameAddress(link.remoteAddress, datagram.address) || datagram.token != link.peerToken) {
      misfit = "a request for a second link (the one we have stays)";
      return Status::ok();
    }
    return link.remoteReady ? Status::ok() : sendDatagram(rank, connection::Kind::kAccept);
  }
  if (link.state == LinkState::kIdle || rank_ > rank) {
    // Crossed requests: the lower rank's wins; we reuse our endpoint.
    link.peerToken = datagram.token;
    return accept(rank, datagram.address);
  }
  return Status::ok();
}

Status Connections::onAccept(int rank, const connection::Datagram& datagram, std::string& misfit) {
  Link& link = at(rank);
  if (link.state == LinkState::kIdle) {
    misfit = "an accept for a connection we never requested";
  } else if (link.state == LinkState::kRequested && datagram.echo != link.token) {
    misfit = "an accept that does not answer our request";
  } else if (link.state == LinkState::kRequested) {
    Status connected = linkUp(rank, datagram.address, /*remoteReady=*/true);
    if (!connected.isOk()) {
      misfit = strCat("an accept with an address we cannot connect to (", connected.message(), ")");
      return Status::ok();
    }
    link.peerToken = datagram.token;
    IBDT_RETURN_IF_ERROR(sendDatagram(rank, connection::Kind::kReady));
    return host_.linkReady(rank);
  } else if (!sameAddress(link.remoteAddress, datagram.address)) {
    misfit = "an accept for a second link (the one we have stays)";
  }
  return Status::ok();
}

Status Connections::onReady(int rank, const connection::Datagram& datagram, std::string& misfit) {
  Link& link = at(rank);
  if (link.state != LinkState::kConnected) {
    misfit = "a ready before any accept";
  } else if (!link.remoteReady && datagram.echo != link.token) {
    misfit = "a ready that does not answer our accept";
  } else if (!link.remoteReady) {
    link.remoteReady = true;
    return host_.linkReady(rank);
  }
  return Status::ok();
}

Status Connections::handleDatagram(std::span<const uint8_t> bytes) {
  auto body = connection::unseal(bytes, datagramKey_);
  auto datagram = body.isOk() ? connection::decode(*body) : Result<connection::Datagram>(body.status());
  if (!datagram.isOk()) {
    std::string line = strCat("messaging: rank ", rank_, " drops a datagram: ", datagram.status().toString());
    log::once(log::Level::kWarn, "connection-datagram-malformed", line + " (more are logged at debug level)");
    IBDT_LOG(kDebug, line);
    return Status::ok();
  }
  const int from = datagram->from;
  if (datagram->job != job_ || datagram->to != rank_ || from < 0 || from >= size_ || from == rank_) {
    IBDT_LOG(kDebug, "messaging: rank ", rank_, " drops a stale or misdirected connection datagram (job 0x", std::hex,
             datagram->job, std::dec, ", from ", from, " to ", datagram->to, ")");
    return Status::ok();
  }
  if (host_.peerFailed(from)) return Status::ok();
  Status status;       // our own failure (endpoint, listener): fails the peer
  std::string misfit;  // the datagram does not fit the link: dropped
  switch (datagram->kind) {
    case connection::Kind::kRequest:
      status = onRequest(from, *datagram, misfit);
      break;
    case connection::Kind::kAccept:
      status = onAccept(from, *datagram, misfit);
      break;
    case connection::Kind::kReady:
      status = onReady(from, *datagram, misfit);
      break;
  }
  if (!misfit.empty()) drop(from, std::move(misfit));
  if (!status.isOk()) host_.failPeer(from, status);
  return Status::ok();
}

void Connections::retryRequests() {
  auto now = std::chrono::steady_clock::now();
  for (int rank = 0; rank < size_; ++rank) {
    Link& link = at(rank);
    if (link.state != LinkState::kRequested || host_.peerFailed(rank) || now < link.nextRequest) continue;
    Status status;
    if (link.deadline.expired()) {
      status = makeError(Code::kPeerFailed, "rank ", rank, " did not answer the connection request within ",
                         connectTimeoutMs_, " ms (IBDT_MSG_CONNECT_TIMEOUT_MS)",
                         link.dropped.empty() ? "" : "; dropped from it: ", link.dropped);
    } else {
      link.interval = std::min<std::chrono::milliseconds>(2 * link.interval, kMaxRetry);
      link.nextRequest = now + link.interval;
      status = sendDatagram(rank, connection::Kind::kRequest);
    }
    if (!status.isOk()) host_.failPeer(rank, status.withContext(strCat("connecting to rank ", rank)));
  }
}

Status Connections::poll(uint64_t& events) {
  for (int handled = 0; handled < kDatagramsPerPoll; ++handled) {
    IBDT_ASSIGN_OR_RETURN(bool got, listener_->receive(datagram_));
    if (!got) break;
    ++events;
    IBDT_RETURN_IF_ERROR(handleDatagram(datagram_));
  }
  expireHalfOpenLinks();
  if (requesting_ > 0) retryRequests();
  return Status::ok();
}

}  // namespace ibdt::messaging
