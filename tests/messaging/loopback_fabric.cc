#include "messaging/loopback_fabric.h"

#include "transport/fabric/shared_receives.h"

#include <cstdlib>
#include <cstring>
#include <string_view>
#include <optional>
#include <set>
#include <vector>

namespace ibdt::messaging::testing {
namespace {

using fabric::Completion;
using fabric::CompletionStatus;
using fabric::Opcode;

struct Region {
  uint8_t* address;
  size_t length;
  uint32_t access;
};

class LoopbackCq;
class LoopbackEndpoint;

}  // namespace

class LoopbackWorld {
 public:
  std::mutex mutex;
  std::condition_variable changed;
  std::map<uint64_t, Region> regions;  // by key (lkey == rkey)
  std::map<uint32_t, LoopbackEndpoint*> endpoints;
  std::map<uint32_t, std::deque<std::vector<uint8_t>>> inboxes;  // by listener id; erased when it is destroyed
  uint32_t nextListener = 1;
  uint64_t nextKey = 1;
  uint32_t nextEndpoint = 1;
  uint32_t nextDomain = 1;
  std::set<uint32_t> deadDomains;  // killLoopbackDomain(): their endpoints' peers fail when they go
  bool sharedReceives = false;     // domains offer shared receive queues (fabric/shared_receives.h)
  bool sharedAlways = false;       // ... and every Context must use them
  SharedReceiveStats shared;      // queues shared, and how often a SEND found one empty

  // Local SGE check: inside a registered region with that key.
  bool localOk(const fabric::Sge& sge, bool write) {
    auto found = regions.find(sge.lkey);
    if (found == regions.end()) return false;
    const Region& region = found->second;
    auto* at = reinterpret_cast<uint8_t*>(sge.address);
    if (at < region.address || at + sge.length > region.address + region.length) return false;
    return !write || (region.access & fabric::kLocalWrite) != 0;
  }
  uint8_t* remote(uint64_t address, uint64_t rkey, size_t length, uint32_t access) {
    auto found = regions.find(rkey);
    if (found == regions.end()) return nullptr;
    const Region& region = found->second;
    auto* at = reinterpret_cast<uint8_t*>(address);
    if (at < region.address || at + length > region.address + region.length) return nullptr;
    if ((region.access & access) != access) return nullptr;
    return at;
  }
};

namespace {

class LoopbackRegion : public fabric::MemoryRegion {
 public:
  LoopbackRegion(std::shared_ptr<LoopbackWorld> world, void* address, size_t length, uint64_t key, uint32_t access,
                 bool owned)
      : MemoryRegion(address, length, static_cast<uint32_t>(key), key, access), world_(std::move(world)),
        owned_(owned) {}
  ~LoopbackRegion() override {
    {
      std::lock_guard lock(world_->mutex);
      world_->regions.erase(rkey());
    }
    if (owned_) std::free(address());
  }

 private:
  std::shared_ptr<LoopbackWorld> world_;
  bool owned_;
};

struct PostedRecv {
  uint64_t id;
  std::vector<fabric::Sge> sges;
};

class LoopbackCq : public fabric::CompletionQueue {
 public:
  explicit LoopbackCq(std::shared_ptr<LoopbackWorld> world) : world_(std::move(world)) {}
  size_t poll(std::span<Completion> out) override {
    std::lock_guard lock(world_->mutex);
    size_t n = 0;
    while (n < out.size() && !entries_.empty()) {
      out[n++] = entries_.front();
      entries_.pop_front();
    }
    return n;
  }
  Status wait(Deadline deadline) override {
    std::unique_lock lock(world_->mutex);
    while (entries_.empty()) {
      if (deadline.isNever()) world_->changed.wait(lock);
      else if (world_->changed.wait_until(lock, deadline.when()) == std::cv_status::timeout) {
        return makeError(Code::kTimeout, "loopback cq wait");
      }
    }
    return Status::ok();
  }
  void push(const Completion& completion) {  // world mutex held
    entries_.push_back(completion);
    world_->changed.notify_all();
  }
  // The receive queue its endpoints share, if it has one (SharedReceiveDomain).
  std::deque<PostedRecv>* shared() { return shared_ ? &*shared_ : nullptr; }
  uint32_t sharedDepth() const { return sharedDepth_; }
  void share(uint32_t depth) {
    shared_.emplace();
    sharedDepth_ = depth;
  }

 private:
  std::shared_ptr<LoopbackWorld> world_;
  std::deque<Completion> entries_;
  std::optional<std::deque<PostedRecv>> shared_;
  uint32_t sharedDepth_ = 0;
};

struct PendingRequest {
  fabric::SendRequest request;
  std::vector<fabric::Sge> sges;
  std::vector<uint8_t> payload;  // gathered at post (sends and writes)
};

class LoopbackEndpoint : public fabric::Endpoint {
 public:
  LoopbackEndpoint(std::shared_ptr<LoopbackWorld> world, uint32_t domain, LoopbackCq& sendCq, LoopbackCq& recvCq,
                   const fabric::EndpointOptions& options, uint32_t maxSge)
      : world_(std::move(world)), domain_(domain), sendCq_(sendCq), recvCq_(recvCq), options_(options),
        maxSge_(maxSge) {
    std::lock_guard lock(world_->mutex);
    id_ = world_->nextEndpoint++;
    world_->endpoints[id_] = this;
  }
  ~LoopbackEndpoint() override {
    std::lock_guard lock(world_->mutex);
    world_->endpoints.erase(id_);
    const bool killed = world_->deadDomains.count(domain_) != 0;
    for (auto& [id, endpoint] : world_->endpoints) {
      if (endpoint->peer_ != id_) continue;
      if (killed) endpoint->peerGone();
      else endpoint->peer_ = 0;  // its next request fails (an orderly close)
    }
  }
  std::vector<uint8_t> address() const override {
    std::vector<uint8_t> out(sizeof(id_));
    std::memcpy(out.data(), &id_, sizeof(id_));
    return out;
  }
  Status connect(std::span<const uint8_t> peerAddress) override {
    if (peerAddress.size() != sizeof(uint32_t)) return makeError(Code::kInvalidArgument, "bad loopback address");
    std::lock_guard lock(world_->mutex);
    std::memcpy(&peer_, peerAddress.data(), sizeof(peer_));
    if (world_->endpoints.count(peer_) == 0) return makeError(Code::kNotFound, "no loopback endpoint ", peer_);
    state_ = fabric::EndpointState::kConnected;
    return Status::ok();
  }
  Status postSend(const fabric::SendRequest& first, const fabric::SendRequest** bad) override {
    std::lock_guard lock(world_->mutex);
    for (const fabric::SendRequest* r = &first; r != nullptr; r = r->next) {
      if (r->numSge > maxSge_ || (r->numSge > 0 && r->sgList == nullptr)) {
        if (bad != nullptr) *bad = r;
        return makeError(Code::kInvalidArgument, "loopback: ", r->numSge, " SGEs, max ", maxSge_);
      }
      if (outstanding_ >= options_.sendQueueDepth) {
        if (bad != nullptr) *bad = r;
        return makeError(Code::kAgain, "loopback send queue full");
      }
      PendingRequest pending;
      pending.request = *r;
      pending.request.next = nullptr;
      pending.sges.assign(r->sgList, r->sgList + r->numSge);
      pending.request.sgList = nullptr;
      bool gather = r->opcode != Opcode::kRead;
      bool ok = true;
      for (const auto& sge : pending.sges) {
        ok = ok && world_->localOk(sge, /*write=*/!gather);
        if (ok && gather) {
          auto* at = reinterpret_cast<const uint8_t*>(sge.address);
          pending.payload.insert(pending.payload.end(), at, at + sge.length);
        }
      }
      ++outstanding_;
      if (!ok) {
        fail(pending, CompletionStatus::kLocalProtection);
        continue;
      }
      queue_.push_back(std::move(pending));
    }
    drain();
    return Status::ok();
  }
  Status postRecv(const fabric::RecvRequest& first, const fabric::RecvRequest** bad) override {
    std::lock_guard lock(world_->mutex);
    for (const fabric::RecvRequest* r = &first; r != nullptr; r = r->next) {
      if (r->numSge > maxSge_) {
        if (bad != nullptr) *bad = r;
        return makeError(Code::kInvalidArgument, "loopback: too many receive SGEs");
      }
      std::deque<PostedRecv>* shared = recvCq_.shared();
      if (shared != nullptr && shared->size() >= recvCq_.sharedDepth()) {
        if (bad != nullptr) *bad = r;
        return makeError(Code::kAgain, "loopback: shared receive queue full");
      }
      if (state_ == fabric::EndpointState::kError && shared == nullptr) {
        recvCq_.push(Completion{r->id, Opcode::kRecv, CompletionStatus::kFlushed, false, 0, 0, id_, 0});
        continue;
      }
      receives().push_back(PostedRecv{r->id, std::vector<fabric::Sge>(r->sgList, r->sgList + r->numSge)});
    }
    // A sender may be waiting for this receive (any sender into a shared queue).
    for (auto& [id, endpoint] : world_->endpoints) {
      auto peer = world_->endpoints.find(endpoint->peer_);
      if (peer != world_->endpoints.end() && &peer->second->receives() == &receives()) endpoint->drain();
    }
    return Status::ok();
  }
  fabric::EndpointState state() const override { return state_; }
  uint32_t id() const override { return id_; }

 private:
  // Its own receive queue, or the one its receive CQ shares.
  std::deque<PostedRecv>& receives() {
    std::deque<PostedRecv>* shared = recvCq_.shared();
    return shared != nullptr ? *shared : recvs_;
  }
  void complete(const PendingRequest& pending, CompletionStatus status, uint32_t bytes) {
    --outstanding_;
    if (status != CompletionStatus::kSuccess || (pending.request.flags & fabric::kSignaled) != 0) {
      Opcode opcode = pending.request.opcode;
      sendCq_.push(Completion{pending.request.id, opcode, status, false, bytes, 0, id_, 0});
    }
  }
  // The peer's rank was killed: as the shm provider's liveness check does,
  // fail everything outstanding, posted receives included, so a rank that
  // only waits to receive learns it too.
  void peerGone() {
    peer_ = 0;
    if (state_ == fabric::EndpointState::kError) return;
    state_ = fabric::EndpointState::kError;
    CompletionStatus cause = CompletionStatus::kRetryExceeded;
    for (; !queue_.empty(); queue_.pop_front(), cause = CompletionStatus::kFlushed) complete(queue_.front(), cause, 0);
    for (; !recvs_.empty(); recvs_.pop_front(), cause = CompletionStatus::kFlushed) {
      recvCq_.push(Completion{recvs_.front().id, Opcode::kRecv, cause, false, 0, 0, id_, 0});
    }
  }
  void fail(const PendingRequest& pending, CompletionStatus status) {
    state_ = fabric::EndpointState::kError;
    complete(pending, status, 0);
    while (!queue_.empty()) {
      complete(queue_.front(), CompletionStatus::kFlushed, 0);
      queue_.pop_front();
    }
  }
  // Executes queued requests in order until one needs a receive that is not there.
  void drain() {
    while (!queue_.empty()) {
      PendingRequest& pending = queue_.front();
      const fabric::SendRequest& r = pending.request;
      if (state_ == fabric::EndpointState::kError) {
        PendingRequest done = std::move(pending);
        queue_.pop_front();
        complete(done, CompletionStatus::kFlushed, 0);
        continue;
      }
      auto found = world_->endpoints.find(peer_);
      if (found == world_->endpoints.end()) {
        PendingRequest done = std::move(pending);
        queue_.pop_front();
        fail(done, CompletionStatus::kRetryExceeded);
        return;
      }
      LoopbackEndpoint& target = *found->second;
      bool needsRecv = r.opcode == Opcode::kSend || r.opcode == Opcode::kSendWithImm ||
                       r.opcode == Opcode::kWriteWithImm;
      if (needsRecv && target.receives().empty()) {  // wait for the peer (RNR)
        if (target.recvCq_.shared() != nullptr) ++world_->shared.foundEmpty;
        return;
      }
      CompletionStatus status = CompletionStatus::kSuccess;
      uint32_t bytes = static_cast<uint32_t>(pending.payload.size());
      if (r.opcode == Opcode::kWrite || r.opcode == Opcode::kWriteWithImm) {
        uint8_t* at = world_->remote(r.remoteAddress, r.rkey, pending.payload.size(), fabric::kRemoteWrite);
        if (at == nullptr) status = CompletionStatus::kRemoteAccess;
        else if (!pending.payload.empty()) std::memcpy(at, pending.payload.data(), pending.payload.size());
      } else if (r.opcode == Opcode::kRead) {
        size_t total = 0;
        for (const auto& sge : pending.sges) total += sge.length;
        const uint8_t* at = world_->remote(r.remoteAddress, r.rkey, total, fabric::kRemoteRead);
        if (at == nullptr) {
          status = CompletionStatus::kRemoteAccess;
        } else {
          for (const auto& sge : pending.sges) {
            std::memcpy(reinterpret_cast<uint8_t*>(sge.address), at, sge.length);
            at += sge.length;
          }
          bytes = static_cast<uint32_t>(total);
        }
      }
      if (status == CompletionStatus::kSuccess && needsRecv) {
        PostedRecv recv = std::move(target.receives().front());
        target.receives().pop_front();
        if (target.recvCq_.shared() != nullptr) {
          world_->shared.lowWater = std::min<uint64_t>(world_->shared.lowWater, target.receives().size());
        }
        bool isSend = r.opcode != Opcode::kWriteWithImm;
        size_t capacity = 0;
        for (const auto& sge : recv.sges) capacity += sge.length;
        CompletionStatus recvStatus = CompletionStatus::kSuccess;
        // As an HCA does: a receive whose region was deregistered since it was
        // posted (its owner is being torn down) is a protection error, never a
        // write into freed memory.
        bool registered = true;
        for (const auto& sge : recv.sges) registered = registered && world_->localOk(sge, /*write=*/true);
        if (!registered) {
          recvStatus = CompletionStatus::kLocalProtection;
          status = CompletionStatus::kRemoteOperation;
        } else if (isSend && pending.payload.size() > capacity) {
          recvStatus = CompletionStatus::kLocalLength;
          status = CompletionStatus::kRemoteInvalidRequest;
        } else if (isSend) {
          size_t offset = 0;
          for (const auto& sge : recv.sges) {
            size_t n = std::min<size_t>(sge.length, pending.payload.size() - offset);
            std::memcpy(reinterpret_cast<uint8_t*>(sge.address), pending.payload.data() + offset, n);
            offset += n;
          }
        }
        Completion arrived{recv.id,
                           isSend ? Opcode::kRecv : Opcode::kRecvWriteWithImm,
                           recvStatus,
                           r.opcode != Opcode::kSend,
                           isSend ? static_cast<uint32_t>(pending.payload.size()) : 0,
                           r.immData,
                           target.id_,
                           0};
        target.recvCq_.push(arrived);
      }
      PendingRequest done = std::move(pending);
      queue_.pop_front();
      if (status != CompletionStatus::kSuccess) {
        fail(done, status);
        return;
      }
      complete(done, status, bytes);
    }
  }

  std::shared_ptr<LoopbackWorld> world_;
  uint32_t domain_;
  LoopbackCq& sendCq_;
  LoopbackCq& recvCq_;
  fabric::EndpointOptions options_;
  uint32_t maxSge_;
  uint32_t id_ = 0;
  uint32_t peer_ = 0;
  uint32_t outstanding_ = 0;
  fabric::EndpointState state_ = fabric::EndpointState::kCreated;
  std::deque<PendingRequest> queue_;
  std::deque<PostedRecv> recvs_;
};

// A connection inbox: reliable and ordered, like the shm provider's; a
// destroyed listener's peers get kPeerFailed (its rank "died").
class LoopbackListener : public fabric::Listener {
 public:
  explicit LoopbackListener(std::shared_ptr<LoopbackWorld> world) : world_(std::move(world)) {
    std::lock_guard lock(world_->mutex);
    id_ = world_->nextListener++;
    world_->inboxes[id_];
  }
  ~LoopbackListener() override {
    std::lock_guard lock(world_->mutex);
    world_->inboxes.erase(id_);
  }
  std::vector<uint8_t> address() const override {
    std::vector<uint8_t> bytes(sizeof id_);
    std::memcpy(bytes.data(), &id_, sizeof id_);
    return bytes;
  }
  size_t maxDatagram() const override { return 256; }
  Result<uint32_t> addPeer(std::span<const uint8_t> peerAddress) override {
    uint32_t id = 0;
    if (peerAddress.size() != sizeof id) return makeError(Code::kProtocol, "loopback listener: bad address");
    std::memcpy(&id, peerAddress.data(), sizeof id);
    return id;
  }
  Status send(uint32_t handle, std::span<const uint8_t> datagram) override {
    if (datagram.empty() || datagram.size() > maxDatagram()) {
      return makeError(Code::kInvalidArgument, "loopback listener: datagram of ", datagram.size(), " bytes");
    }
    std::lock_guard lock(world_->mutex);
    auto found = world_->inboxes.find(handle);
    if (found == world_->inboxes.end()) return makeError(Code::kPeerFailed, "loopback listener ", handle, " is gone");
    found->second.emplace_back(datagram.begin(), datagram.end());
    return Status::ok();
  }
  Result<bool> receive(std::vector<uint8_t>& datagram) override {
    std::lock_guard lock(world_->mutex);
    auto& inbox = world_->inboxes[id_];
    if (inbox.empty()) return false;
    datagram = std::move(inbox.front());
    inbox.pop_front();
    return true;
  }

 private:
  std::shared_ptr<LoopbackWorld> world_;
  uint32_t id_ = 0;
};

class LoopbackDomain : public fabric::Domain, public fabric::SharedReceiveDomain {
 public:
  LoopbackDomain(std::shared_ptr<LoopbackWorld> world, fabric::Caps caps)
      : world_(std::move(world)), caps_(std::move(caps)) {
    std::lock_guard lock(world_->mutex);
    id_ = world_->nextDomain++;
  }
  void kill() {
    std::lock_guard lock(world_->mutex);
    world_->deadDomains.insert(id_);
  }
  const fabric::Caps& caps() const override { return caps_; }
  Result<std::unique_ptr<fabric::MemoryRegion>> registerMemory(void* address, size_t length,
                                                               uint32_t access) override {
    return add(address, length, access, false);
  }
  Result<std::unique_ptr<fabric::MemoryRegion>> allocateMemory(size_t length, uint32_t access) override {
    size_t rounded = (length + caps_.pageSize - 1) / caps_.pageSize * caps_.pageSize;
    void* memory = std::aligned_alloc(caps_.pageSize, rounded == 0 ? caps_.pageSize : rounded);
    if (memory == nullptr) return makeError(Code::kResource, "loopback: out of memory");
    std::memset(memory, 0xA5, rounded);
    return add(memory, length, access, true);
  }
  Result<std::unique_ptr<fabric::CompletionQueue>> createCompletionQueue(uint32_t) override {
    return std::unique_ptr<fabric::CompletionQueue>(new LoopbackCq(world_));
  }
  Result<std::unique_ptr<fabric::Endpoint>> createEndpoint(fabric::CompletionQueue& sendQueue,
                                                          fabric::CompletionQueue& recvQueue,
                                                          const fabric::EndpointOptions& options) override {
    return std::unique_ptr<fabric::Endpoint>(new LoopbackEndpoint(world_, id_, static_cast<LoopbackCq&>(sendQueue),
                                                                  static_cast<LoopbackCq&>(recvQueue), options,
                                                                  caps_.maxSendSge));
  }
  Result<std::unique_ptr<fabric::Listener>> createListener() override {
    return std::unique_ptr<fabric::Listener>(new LoopbackListener(world_));
  }
  fabric::SharedReceiveSupport sharedReceiveSupport() const override {
    return {.available = world_->sharedReceives, .always = world_->sharedAlways,
            .maxDepth = caps_.maxCompletionQueueDepth};
  }
  Status shareReceives(fabric::CompletionQueue& recvQueue, uint32_t depth) override {
    if (!world_->sharedReceives) return makeError(Code::kUnsupported, "loopback: no shared receive queues");
    std::lock_guard lock(world_->mutex);
    static_cast<LoopbackCq&>(recvQueue).share(depth);
    ++world_->shared.queues;
    return Status::ok();
  }

 private:
  Result<std::unique_ptr<fabric::MemoryRegion>> add(void* address, size_t length, uint32_t access, bool owned) {
    std::lock_guard lock(world_->mutex);
    uint64_t key = world_->nextKey++;
    world_->regions[key] = Region{static_cast<uint8_t*>(address), length, access};
    return std::unique_ptr<fabric::MemoryRegion>(new LoopbackRegion(world_, address, length, key, access, owned));
  }

  std::shared_ptr<LoopbackWorld> world_;
  fabric::Caps caps_;
  uint32_t id_ = 0;
};

}  // namespace

void killLoopbackDomain(fabric::Domain& domain) { dynamic_cast<LoopbackDomain&>(domain).kill(); }

std::shared_ptr<LoopbackWorld> makeLoopbackWorld(bool sharedReceives) {
  auto world = std::make_shared<LoopbackWorld>();
  // LOOPBACK_SHARED_RECEIVES=1 runs a whole suite over shared queues: every
  // receive CQ shares one, as with IBDT_VERBS_SRQ=1 (tests/messaging/CMakeLists.txt).
  const char* forced = std::getenv("LOOPBACK_SHARED_RECEIVES");
  world->sharedAlways = forced != nullptr && std::string_view(forced) == "1";
  world->sharedReceives = sharedReceives || world->sharedAlways;
  return world;
}

SharedReceiveStats sharedReceiveStats(LoopbackWorld& world) {
  std::lock_guard lock(world.mutex);
  return world.shared;
}

fabric::Caps loopbackCaps() {
  fabric::Caps caps;
  caps.provider = "loopback";
  caps.device = "loopback";
  caps.maxSendSge = 4;
  caps.maxRecvSge = 4;
  caps.maxInline = 0;
  caps.maxMessageSize = uint64_t{1} << 30;
  caps.maxSendQueueDepth = 64;
  caps.maxRecvQueueDepth = 4096;
  caps.maxCompletionQueueDepth = 1 << 20;
  caps.maxReadsInFlight = 4;
  caps.rdmaRead = true;
  caps.writeWithImm = true;
  caps.pageSize = 4096;
  caps.transfer = {200, 20, 400, 5, 200, 5, 20, false};
  caps.registration = {1000, 100};
  return caps;
}

std::unique_ptr<fabric::Domain> openLoopbackDomain(std::shared_ptr<LoopbackWorld> world, fabric::Caps caps) {
  return std::make_unique<LoopbackDomain>(std::move(world), std::move(caps));
}

}  // namespace ibdt::messaging::testing
