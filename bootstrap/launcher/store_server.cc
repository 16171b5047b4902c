#include "bootstrap/launcher/store_server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <list>
#include <map>
#include <optional>

#include "base/log.h"
#include "bootstrap/node_map.h"
#include "bootstrap/store_wire.h"

namespace ibdt::bootstrap {
namespace {

using Clock = std::chrono::steady_clock;

// Out of descriptors, accept() fails while the connection stays queued: the
// listening socket is not polled again for this long (no busy loop).
constexpr auto kAcceptBackoff = std::chrono::milliseconds(100);
// The smallest commit entry: two empty blobs (their u32 lengths).
constexpr size_t kMinCommitEntryBytes = 8;

std::string descriptorLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return "unknown";
  return strCat(limit.rlim_cur, " (ulimit -n; hard limit ", limit.rlim_max, ")");
}

// Compares without an early exit, so response time does not reveal how much
// of a guessed token was right.
bool tokensEqual(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

Clock::time_point expiry(uint64_t timeoutMs) {
  if (timeoutMs == wire::kNoTimeout) return Clock::time_point::max();
  return Clock::now() + std::chrono::milliseconds(std::min<uint64_t>(timeoutMs, uint64_t{1} << 40));
}

std::string rankList(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) out += strCat(i == 0 ? "" : ", ", ranks[i]);
  return out;
}

}  // namespace

// All state of the serving thread; touched by that thread only.
class StoreServer::Loop {
 public:
  explicit Loop(StoreServer& server)
      : server_(server), size_(static_cast<int>(server.nodeOfRank_.size())), values_(size_), ended_(size_), fence_(size_) {}

  void run() {
    while (!server_.stopping_.load()) {
      std::vector<pollfd> fds;
      fds.push_back({server_.wakeFd_, POLLIN, 0});
      fds.push_back({server_.listenFd_, static_cast<short>(Clock::now() < acceptPausedUntil_ ? 0 : POLLIN), 0});
      for (Client& client : clients_) {
        short events = client.closeAfterFlush ? 0 : POLLIN;
        if (!client.out.empty()) events |= POLLOUT;
        fds.push_back({client.fd, events, 0});
      }
      int ready = ::poll(fds.data(), fds.size(), pollTimeoutMs());
      if (ready < 0 && errno != EINTR) {
        IBDT_LOG(kError, "ibdt-run store: poll: ", std::strerror(errno));
        return;
      }
      if (fds[0].revents != 0) drainWakeups();
      if (fds[1].revents & POLLIN) accept();
      size_t index = 2;
      for (auto it = clients_.begin(); it != clients_.end() && index < fds.size(); ++index) {
        Client& client = *it;
        if (fds[index].revents & (POLLIN | POLLHUP | POLLERR)) readFrom(client);
        if (!client.dead && !client.out.empty()) flush(client);
        if (client.dead || (client.closeAfterFlush && client.out.empty())) {
          it = drop(it);
        } else {
          ++it;
        }
      }
      expireWaits();
      dropSilentClients();
    }
    for (auto it = clients_.begin(); it != clients_.end();) it = drop(it);
  }

 private:
  struct Client {
    int fd = -1;
    uint64_t serial = 0;  // names the client in waits, never reused
    int rank = -1;        // -1 until the hello is accepted
    pid_t pid = -1;       // the connecting process (SO_PEERCRED)
    Clock::time_point helloBy;  // dropped if still without a rank by then
    std::string in;
    std::string out;
    bool closeAfterFlush = false;
    bool dead = false;
  };
  struct Waiter {
    uint64_t client = 0;
    uint64_t request = 0;
    Clock::time_point expires;
    int rank = 0;          // the rank waited for (get) or arriving (fence)
    std::string key;       // get only
    uint64_t timeoutMs = 0;
  };

  int pollTimeoutMs() const {
    Clock::time_point next = Clock::time_point::max();
    if (acceptPausedUntil_ > Clock::now()) next = acceptPausedUntil_;
    for (const Client& client : clients_) {
      if (client.rank < 0) next = std::min(next, client.helloBy);
    }
    for (const Waiter& get : gets_) next = std::min(next, get.expires);
    for (const auto& arrival : fence_) {
      if (arrival) next = std::min(next, arrival->expires);
    }
    if (next == Clock::time_point::max()) return -1;
    auto left = std::chrono::ceil<std::chrono::milliseconds>(next - Clock::now()).count();
    return static_cast<int>(std::clamp<long long>(left, 0, INT_MAX));
  }

  void drainWakeups() {
    uint64_t count;
    while (::read(server_.wakeFd_, &count, sizeof(count)) < 0 && errno == EINTR) {
    }
    std::vector<std::pair<int, std::string>> ended;
    {
      std::lock_guard lock(server_.endedMutex_);
      ended.swap(server_.endedQueue_);
    }
    for (auto& [rank, how] : ended) onRankEnded(rank, std::move(how));
  }

  void accept() {
    int fd = ::accept4(server_.listenFd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) {
        if (!warnedDescriptors_) {
          IBDT_LOG(kError, "ibdt-run store: out of file descriptors (", std::strerror(errno),
                   "); the limit is ", descriptorLimit(), "; waiting for connections to close");
          warnedDescriptors_ = true;
        }
        acceptPausedUntil_ = Clock::now() + kAcceptBackoff;
      }
      return;
    }
    Client client;
    client.fd = fd;
    client.serial = nextSerial_++;
    client.helloBy = Clock::now() + server_.helloTimeout_;
    ucred credentials{};
    socklen_t length = sizeof(credentials);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0) client.pid = credentials.pid;
    clients_.push_back(std::move(client));
  }

  // A connection that never says hello holds a descriptor and a slot: a
  // stranger could exhaust both. Drop it after the hello deadline.
  void dropSilentClients() {
    Clock::time_point now = Clock::now();
    for (auto it = clients_.begin(); it != clients_.end();) {
      if (it->rank < 0 && !it->closeAfterFlush && it->helloBy <= now) {
        server_.rejected_.fetch_add(1);
        IBDT_LOG(kWarn, "ibdt-run store: dropped a connection that did not say hello within ",
                 server_.helloTimeout_.count(), " ms");
        it = drop(it);
      } else {
        ++it;
      }
    }
  }

  std::list<Client>::iterator drop(std::list<Client>::iterator it) {
    uint64_t serial = it->serial;
    std::erase_if(gets_, [serial](const Waiter& w) { return w.client == serial; });
    for (auto& arrival : fence_) {
      if (arrival && arrival->client == serial) {
        arrival.reset();
        --arrived_;
      }
    }
    ::close(it->fd);
    return clients_.erase(it);
  }

  Client* findClient(uint64_t serial) {
    for (Client& client : clients_) {
      if (client.serial == serial) return client.dead ? nullptr : &client;
    }
    return nullptr;
  }

  void readFrom(Client& client) {
    char chunk[65536];
    for (;;) {
      ssize_t got = ::recv(client.fd, chunk, sizeof(chunk), 0);
      if (got > 0) {
        client.in.append(chunk, static_cast<size_t>(got));
        if (static_cast<size_t>(got) < sizeof(chunk)) break;
      } else if (got == 0) {
        client.dead = true;
        return;
      } else if (errno == EINTR) {
        continue;
      } else {
        if (errno != EAGAIN && errno != EWOULDBLOCK) client.dead = true;
        break;
      }
    }
    while (!client.dead && !client.closeAfterFlush && client.in.size() >= 4) {
      uint32_t length = wire::frameLength(client.in.data());
      if (length > wire::kMaxFrame || (client.rank < 0 && length > 4096)) {
        reject(client, 0, "frame too large");
        return;
      }
      if (client.in.size() < 4 + size_t{length}) break;
      std::string payload = client.in.substr(4, length);
      client.in.erase(0, 4 + size_t{length});
      handle(client, payload);
    }
  }

  void flush(Client& client) {
    while (!client.out.empty()) {
      ssize_t sent = ::send(client.fd, client.out.data(), client.out.size(), MSG_NOSIGNAL);
      if (sent > 0) {
        client.out.erase(0, static_cast<size_t>(sent));
      } else if (sent < 0 && errno == EINTR) {
        continue;
      } else {
        if (sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK) client.dead = true;
        return;
      }
    }
  }

  void reply(Client& client, uint64_t request, const Status& status, std::string_view fields = {}) {
    client.out += wire::Writer(wire::Op::kReply, request)
                      .u8(static_cast<uint8_t>(status.code()))
                      .blob(status.message())
                      .raw(fields)
                      .frame();
  }

  void replyTo(uint64_t serial, uint64_t request, const Status& status, std::string_view body = {}) {
    if (Client* client = findClient(serial)) reply(*client, request, status, body);
  }

  void reject(Client& client, uint64_t request, std::string_view why) {
    server_.rejected_.fetch_add(1);
    IBDT_LOG(kWarn, "ibdt-run store: refused a connection: ", why);
    reply(client, request, makeError(Code::kProtocol, "ibdt-run store refused the connection: ", why));
    client.closeAfterFlush = true;
  }

  void handle(Client& client, std::string_view payload) {
    wire::Reader in(payload);
    auto op = static_cast<wire::Op>(in.u8());
    uint64_t request = in.u64();
    if (client.rank < 0) {
      if (op != wire::Op::kHello) return reject(client, request, "the first message must present the job token");
      return hello(client, request, in);
    }
    switch (op) {
      case wire::Op::kCommit: return commit(client, request, in);
      case wire::Op::kFence: return fence(client, request, in);
      case wire::Op::kGet: return get(client, request, in);
      default: return reject(client, request, strCat("unknown operation ", int(op)));
    }
  }

  void hello(Client& client, uint64_t request, wire::Reader& in) {
    uint32_t version = in.u32();
    std::string_view token = in.blob();
    uint32_t rank = in.u32();
    if (!in.finish("hello").isOk()) return reject(client, request, "malformed hello");
    if (!tokensEqual(token, server_.token_)) return reject(client, request, "wrong job token");
    if (version != wire::kVersion) {
      return reject(client, request, strCat("protocol version ", version, " (this ibdt-run speaks ", wire::kVersion, ")"));
    }
    if (rank >= static_cast<uint32_t>(size_)) {
      return reject(client, request, strCat("rank ", rank, " is outside the job of ", size_));
    }
    // Another process claiming a connected rank would share its fence and
    // its values. The rank's own process may open a second Store.
    for (const Client& other : clients_) {
      if (other.rank == static_cast<int>(rank) && !other.dead && other.pid != client.pid) {
        return reject(client, request, strCat("rank ", rank, " is already connected from another process"));
      }
    }
    client.rank = static_cast<int>(rank);
    Placement placement = placementFromNodeMap(server_.nodeOfRank_, client.rank);
    std::string fields = wire::Writer()
                             .u32(static_cast<uint32_t>(placement.size))
                             .u32(static_cast<uint32_t>(placement.localRank))
                             .u32(static_cast<uint32_t>(placement.localSize))
                             .u32(static_cast<uint32_t>(placement.nodeId))
                             .u32(static_cast<uint32_t>(placement.numNodes))
                             .fields();
    reply(client, request, Status::ok(), fields);
  }

  void commit(Client& client, uint64_t request, wire::Reader& in) {
    uint32_t count = in.u32();
    // The count is the client's word: bound it by the bytes present before
    // reserving or looping (a count of 2^32 - 1 with no entries must not spin).
    if (count > in.remaining() / kMinCommitEntryBytes) {
      return reject(client, request,
                    strCat("commit claims ", count, " entries but carries ", in.remaining(), " bytes"));
    }
    std::vector<std::pair<std::string_view, std::string_view>> entries;
    entries.reserve(count);
    for (uint32_t i = 0; i < count && !in.failed(); ++i) {
      std::string_view key = in.blob();
      std::string_view value = in.blob();
      entries.emplace_back(key, value);
    }
    if (Status s = in.finish("commit"); !s.isOk()) return reject(client, request, s.message());
    auto& mine = values_[static_cast<size_t>(client.rank)];
    for (auto [key, value] : entries) mine.insert_or_assign(std::string(key), std::string(value));
    reply(client, request, Status::ok());
    // Answer the gets that were waiting for these keys.
    std::erase_if(gets_, [&](const Waiter& w) {
      if (w.rank != client.rank) return false;
      auto found = mine.find(w.key);
      if (found == mine.end()) return false;
      replyTo(w.client, w.request, Status::ok(), valueField(found->second));
      return true;
    });
  }

  static std::string valueField(std::string_view value) { return wire::Writer().blob(value).fields(); }

  void fence(Client& client, uint64_t request, wire::Reader& in) {
    uint64_t timeoutMs = in.u64();
    if (Status s = in.finish("fence"); !s.isOk()) return reject(client, request, s.message());
    std::vector<int> gone = endedRanks();
    if (!gone.empty()) {
      return reply(client, request, makeError(Code::kPeerFailed, "fence: rank ", gone[0], " ",
                                              ended_[static_cast<size_t>(gone[0])].value(),
                                              " before joining the fence (ranks that ended: ", rankList(gone), ")"));
    }
    auto& arrival = fence_[static_cast<size_t>(client.rank)];
    if (arrival) {
      return reply(client, request,
                   makeError(Code::kState, "fence: rank ", client.rank, " is already waiting in a fence"));
    }
    arrival = Waiter{client.serial, request, expiry(timeoutMs), client.rank, {}, timeoutMs};
    if (++arrived_ < size_) return;
    for (auto& waiting : fence_) {
      replyTo(waiting->client, waiting->request, Status::ok());
      waiting.reset();
    }
    arrived_ = 0;
  }

  void get(Client& client, uint64_t request, wire::Reader& in) {
    uint32_t rank = in.u32();
    std::string key(in.blob());
    uint64_t timeoutMs = in.u64();
    if (Status s = in.finish("get"); !s.isOk()) return reject(client, request, s.message());
    if (rank >= static_cast<uint32_t>(size_)) {
      return reply(client, request,
                   makeError(Code::kInvalidArgument, "store get: rank ", rank, " is outside the job [0, ", size_, ")"));
    }
    const auto& theirs = values_[rank];
    if (auto found = theirs.find(key); found != theirs.end()) {
      return reply(client, request, Status::ok(), valueField(found->second));
    }
    Waiter waiter{client.serial, request, expiry(timeoutMs), static_cast<int>(rank), std::move(key), timeoutMs};
    if (ended_[rank]) return reply(client, request, getFailure(waiter));
    gets_.push_back(std::move(waiter));
  }

  Status getFailure(const Waiter& w) const {
    if (const auto& how = ended_[static_cast<size_t>(w.rank)]) {
      return makeError(Code::kPeerFailed, "store get: rank ", w.rank, " ", *how, " without putting '", w.key, "'");
    }
    return makeError(Code::kTimeout, "store get: rank ", w.rank, " did not put '", w.key, "' within ", w.timeoutMs,
                     " ms");
  }

  std::vector<int> endedRanks() const {
    std::vector<int> gone;
    for (int rank = 0; rank < size_; ++rank) {
      if (ended_[static_cast<size_t>(rank)]) gone.push_back(rank);
    }
    return gone;
  }

  void expireWaits() {
    Clock::time_point now = Clock::now();
    std::erase_if(gets_, [&](const Waiter& w) {
      if (w.expires > now) return false;
      replyTo(w.client, w.request, getFailure(w));
      return true;
    });
    std::vector<int> missing;
    for (int rank = 0; rank < size_; ++rank) {
      if (!fence_[static_cast<size_t>(rank)]) missing.push_back(rank);
    }
    for (auto& arrival : fence_) {
      if (!arrival || arrival->expires > now) continue;
      replyTo(arrival->client, arrival->request,
              makeError(Code::kTimeout, "fence: rank(s) ", rankList(missing), " did not arrive within ",
                        arrival->timeoutMs, " ms"));
      arrival.reset();
      --arrived_;
    }
  }

  void onRankEnded(int rank, std::string how) {
    if (rank < 0 || rank >= size_) return;
    ended_[static_cast<size_t>(rank)] = how;
    std::erase_if(gets_, [&](const Waiter& w) {
      if (w.rank != rank) return false;
      replyTo(w.client, w.request, getFailure(w));
      return true;
    });
    for (auto& arrival : fence_) {
      if (!arrival) continue;
      replyTo(arrival->client, arrival->request,
              makeError(Code::kPeerFailed, "fence: rank ", rank, " ", how, " before joining the fence"));
      arrival.reset();
    }
    arrived_ = 0;
  }

  StoreServer& server_;
  int size_;
  std::list<Client> clients_;
  uint64_t nextSerial_ = 1;
  std::vector<std::map<std::string, std::string, std::less<>>> values_;  // by rank
  std::vector<std::optional<std::string>> ended_;                         // how each rank ended
  std::vector<std::optional<Waiter>> fence_;                              // arrivals by rank
  int arrived_ = 0;
  std::vector<Waiter> gets_;
  Clock::time_point acceptPausedUntil_{};
  bool warnedDescriptors_ = false;
};

StoreServer::StoreServer(std::string token, std::vector<int> nodeOfRank, std::chrono::milliseconds helloTimeout)
    : token_(std::move(token)), nodeOfRank_(std::move(nodeOfRank)), helloTimeout_(helloTimeout) {}

StoreServer::~StoreServer() { stop(); }

Status StoreServer::listen(const std::string& socketPath) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (socketPath.size() >= sizeof(address.sun_path)) {
    return makeError(Code::kInvalidArgument, "store socket path '", socketPath, "' is too long");
  }
  std::memcpy(address.sun_path, socketPath.c_str(), socketPath.size() + 1);
  listenFd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listenFd_ < 0) return makeError(Code::kSystem, "socket(AF_UNIX): ", std::strerror(errno));
  // Created 0600 from the start: no window in which another user may connect.
  mode_t previous = ::umask(0177);
  int bound = ::bind(listenFd_, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  int bindError = errno;
  ::umask(previous);
  if (bound != 0) return makeError(Code::kSystem, "bind '", socketPath, "': ", std::strerror(bindError));
  if (::listen(listenFd_, 1024) != 0) return makeError(Code::kSystem, "listen '", socketPath, "': ", std::strerror(errno));
  wakeFd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wakeFd_ < 0) return makeError(Code::kSystem, "eventfd: ", std::strerror(errno));
  return Status::ok();
}

void StoreServer::serve() {
  thread_ = std::thread([this] { Loop(*this).run(); });
}

void StoreServer::stop() {
  if (thread_.joinable()) {
    stopping_.store(true);
    uint64_t one = 1;
    while (::write(wakeFd_, &one, sizeof(one)) < 0 && errno == EINTR) {
    }
    thread_.join();
  }
  if (listenFd_ >= 0) ::close(listenFd_);
  if (wakeFd_ >= 0) ::close(wakeFd_);
  listenFd_ = wakeFd_ = -1;
}

void StoreServer::rankEnded(int rank, std::string how) {
  {
    std::lock_guard lock(endedMutex_);
    endedQueue_.emplace_back(rank, std::move(how));
  }
  uint64_t one = 1;
  while (::write(wakeFd_, &one, sizeof(one)) < 0 && errno == EINTR) {
  }
}

}  // namespace ibdt::bootstrap
