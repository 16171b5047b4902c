// ibdt/fabric.h — the verbs-shaped provider interface.
//
// Everything above the fabric (memory, messaging, collectives) is written
// against these semantics, which mirror an InfiniBand RC queue pair, so it
// runs unchanged on every provider:
//   * shm   — software RDMA between the processes of one host (the default);
//   * verbs — rdma-core libibverbs on InfiniBand or RoCE.
// Providers differ only in what caps() publishes.
//
// Rules shared by every provider (as in rdma-core):
//   * post*() returns an error only for a malformed request (kInvalidArgument),
//     or kAgain when the queue is full (back-pressure, not an error: the
//     requests before *badRequest were posted, retry the rest later);
//   * the outcome of a posted request arrives in its completion, never as a
//     return value of the post; a failed request completes with an error
//     status and moves its endpoint to EndpointState::kError, after which
//     every outstanding and later request completes as kFlushed;
//   * requests on one endpoint are executed and delivered in order;
//   * a peer may touch only registered memory, inside the region, with the
//     access flags the region grants; a deregistered rkey stops working at once.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ibdt/deadline.h"
#include "ibdt/status.h"

namespace ibdt::fabric {

// Access flags of a memory region (bitwise or).
enum Access : uint32_t {
  kLocalWrite = 1u << 0,
  kRemoteWrite = 1u << 1,
  kRemoteRead = 1u << 2,
};

// Registration cost model used by optimistic group registration:
// registering `pages` pages costs about fixedNs + perPageNs * pages.
struct RegistrationCost {
  double fixedNs = 0;
  double perPageNs = 0;
};

// Cost model of one-sided transfers, measured or published by the provider:
// a request to user memory costs about perRequestNs + perSgeNs * entries
// + perRemotePageNs * distinct remote pages + bytes / bytesPerNs. (On shm
// the per-page term is real: the kernel pins each remote page.) A request
// whose remote side is memory from Domain::allocateMemory (staging buffers,
// pools) costs allocatedPerRequestNs + allocatedPerSgeNs * entries + bytes /
// allocatedBytesPerNs (on shm a plain copy into the mapped segment; on an
// HCA the same as user memory).
struct TransferCost {
  double perRequestNs = 0;
  double perSgeNs = 0;
  double perRemotePageNs = 0;
  double bytesPerNs = 1;
  double allocatedPerRequestNs = 0;
  double allocatedBytesPerNs = 1;
  double allocatedPerSgeNs = 0;
  // The initiating process's CPU moves the bytes (shm), so a sender's
  // packing and its transfers do not overlap; false where a DMA engine does.
  bool initiatorCopies = false;
};

struct Caps {
  std::string provider;  // "shm" or "verbs"
  std::string device;    // e.g. "shm", "mlx5_0:1", "rxe0:1"
  uint32_t maxSendSge = 1;
  uint32_t maxRecvSge = 1;
  uint32_t maxInline = 0;         // bytes a send may carry inline
  uint64_t maxMessageSize = 0;    // bytes in one request
  uint32_t maxSendQueueDepth = 0;
  uint32_t maxRecvQueueDepth = 0;
  uint32_t maxCompletionQueueDepth = 0;
  uint32_t maxReadsInFlight = 0;  // outstanding RDMA READs per endpoint (max_qp_rd_atom)
  bool rdmaRead = false;
  bool writeWithImm = false;
  size_t pageSize = 4096;
  // registerMemory of part of allocateMemory's memory is cheap (no pinning:
  // shm adds a table entry) and its key reaches exactly that part, so a
  // buffer pool may give every buffer it hands out a key of its own.
  bool cheapSubRegistration = false;
  // Domain::bindWindow works: a key to part of allocateMemory's memory that
  // only one endpoint's peer can use, revoked when it is destroyed (verbs:
  // type-2 memory windows, where the device has them).
  bool memoryWindows = false;
  RegistrationCost registration;
  TransferCost transfer;
};

// What a peer needs to access a region: serialisable, 24 bytes on the wire.
struct RemoteKey {
  uint64_t address = 0;
  uint64_t length = 0;
  uint64_t rkey = 0;

  static constexpr size_t kWireSize = 24;
  void serialize(std::span<uint8_t, kWireSize> out) const;
  static Result<RemoteKey> parse(std::span<const uint8_t> bytes);
};

// A registered (pinned) memory region. Destroying it deregisters it.
class MemoryRegion {
 public:
  virtual ~MemoryRegion() = default;
  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;

  void* address() const { return address_; }
  size_t length() const { return length_; }
  uint32_t lkey() const { return lkey_; }
  uint64_t rkey() const { return rkey_; }
  uint32_t access() const { return access_; }
  RemoteKey remoteKey() const { return {reinterpret_cast<uint64_t>(address_), length_, rkey_}; }

 protected:
  MemoryRegion(void* address, size_t length, uint32_t lkey, uint64_t rkey, uint32_t access)
      : address_(address), length_(length), lkey_(lkey), rkey_(rkey), access_(access) {}

 private:
  void* address_;
  size_t length_;
  uint32_t lkey_;
  uint64_t rkey_;
  uint32_t access_;
};

// One scatter/gather entry: local memory inside a region with key `lkey`.
// Same layout as struct ibv_sge.
struct Sge {
  uint64_t address = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
};

enum class Opcode : uint8_t {
  kSend,          // two-sided; consumes a posted receive at the target
  kSendWithImm,   // as kSend, and delivers immData
  kWrite,         // one-sided RDMA WRITE (gather locally, contiguous remotely)
  kWriteWithImm,  // RDMA WRITE that also consumes a posted receive and delivers immData
  kRead,          // one-sided RDMA READ (contiguous remotely, scatter locally)
  kRecv,          // completion of a receive consumed by kSend/kSendWithImm
  kRecvWriteWithImm,  // completion of a receive consumed by kWriteWithImm
};

enum SendFlags : uint32_t {
  kSignaled = 1u << 0,  // produce a completion on success (errors always complete)
  kInline = 1u << 1,    // copy the payload at post time (at most caps().maxInline bytes)
  kFence = 1u << 2,     // start only after earlier READs on this endpoint completed
};

// A send-queue work request; chain several with `next` and post them in one call.
struct SendRequest {
  uint64_t id = 0;
  Opcode opcode = Opcode::kSend;
  uint32_t flags = kSignaled;
  const Sge* sgList = nullptr;
  uint32_t numSge = 0;
  uint32_t immData = 0;
  uint64_t remoteAddress = 0;  // kWrite, kWriteWithImm, kRead
  uint64_t rkey = 0;
  const SendRequest* next = nullptr;
};

// A SEND whose payload the caller writes in place (UCX's "bcopy" pack
// callback): pack(context, destination) writes exactly `length` bytes.
struct PackedSend {
  uint64_t id = 0;
  uint32_t flags = kSignaled;  // kSignaled: a completion on success too
  uint32_t length = 0;
  Status (*pack)(void* context, uint8_t* destination) = nullptr;
  void* context = nullptr;
};

struct RecvRequest {
  uint64_t id = 0;
  const Sge* sgList = nullptr;
  uint32_t numSge = 0;
  const RecvRequest* next = nullptr;
};

enum class CompletionStatus : uint8_t {
  kSuccess,
  kLocalLength,           // receive buffer too small for the incoming send
  kLocalProtection,       // a local SGE is outside its region or lacks access
  kLocalOperation,        // internal error on the local side
  kRemoteAccess,          // bad rkey, stale rkey, out of range, or flag missing at the target
  kRemoteInvalidRequest,  // the target rejected the request (e.g. too long)
  kRemoteOperation,       // the target failed to carry it out
  kRetryExceeded,         // the peer is unreachable or dead
  kFlushed,               // not executed: the endpoint was already in the error state
  kFatal,                 // anything else
};

std::string_view completionStatusName(CompletionStatus status);

struct Completion {
  uint64_t id = 0;
  Opcode opcode = Opcode::kSend;
  CompletionStatus status = CompletionStatus::kSuccess;
  bool hasImm = false;
  uint32_t byteLength = 0;  // bytes received (receive completions) or transferred
  uint32_t immData = 0;
  uint32_t endpointId = 0;  // Endpoint::id() of the endpoint it belongs to
  uint32_t vendorError = 0;
};

// Turns a failed completion into a Status naming the operation, the status
// and `peer` (e.g. "rank 3"); kFlushed maps to Code::kFlushed, kRetryExceeded
// to Code::kPeerFailed, kRemoteAccess to Code::kRemoteAccess.
Status completionError(const Completion& completion, std::string_view peer);

class CompletionQueue {
 public:
  virtual ~CompletionQueue() = default;
  // Never blocks. Writes up to out.size() completions; returns how many.
  virtual size_t poll(std::span<Completion> out) = 0;
  // Sleeps (does not spin) until a completion may be available or the
  // deadline passes (Code::kTimeout). Completions are then taken with poll().
  virtual Status wait(Deadline deadline) = 0;
};

enum class EndpointState : uint8_t { kCreated, kConnected, kError };

struct EndpointOptions {
  uint32_t sendQueueDepth = 256;
  uint32_t recvQueueDepth = 256;
  uint32_t maxSendSge = 0;  // 0: caps().maxSendSge
  uint32_t maxRecvSge = 0;  // 0: caps().maxRecvSge
  uint32_t maxInline = 0;
};

// An RC endpoint (queue pair) connected to exactly one peer endpoint.
class Endpoint {
 public:
  virtual ~Endpoint() = default;
  // Opaque address to give the peer (through the bootstrap Store).
  virtual std::vector<uint8_t> address() const = 0;
  // Connects to the peer whose address() is `peerAddress`. Validates the blob.
  virtual Status connect(std::span<const uint8_t> peerAddress) = 0;
  virtual Status postSend(const SendRequest& first, const SendRequest** badRequest = nullptr) = 0;
  virtual Status postRecv(const RecvRequest& first, const RecvRequest** badRequest = nullptr) = 0;
  // Posts a SEND whose bytes `send.pack` writes straight into the peer's
  // receive buffer, where the provider can reach it (shm maps it): the copy
  // out of a registered send buffer is saved. Only when it can be done at
  // once and in order: kAgain (nothing posted, pack not called) when
  // requests are still queued, the peer has no receive posted, or it would
  // not fit one mapped piece; the caller then packs into a registered buffer
  // and uses postSend, which also reports any error. A pack error is
  // returned and nothing is posted. kUnsupported by default (an HCA reads
  // registered memory: pack into a send buffer there).
  virtual Status postSendPacked(const PackedSend& send) {
    (void)send;
    return Status(Code::kUnsupported, "this provider has no in-place packed send");
  }
  virtual EndpointState state() const = 0;
  // Identifies this endpoint in Completion::endpointId.
  virtual uint32_t id() const = 0;
  // Names the peer in error messages and logs, e.g. "rank 3".
  void setPeerLabel(std::string label) { peerLabel_ = std::move(label); }
  const std::string& peerLabel() const { return peerLabel_; }

 private:
  std::string peerLabel_ = "peer";
};

// A connectionless inbox through which endpoints created on demand find
// each other (InfiniBand's classic answer is a UD queue pair, as MVAPICH's
// on-demand connection manager uses; rdma_cm uses a listener). Each user
// creates one per domain, publishes its address() once (e.g. in an
// allgather at start-up) and then exchanges small datagrams with any peer
// listener: a connection request carrying an Endpoint::address() and the
// reply carrying the other's. O(1) resources per listener, whatever the
// job size.
//
// Delivery, as on a UD queue pair: a datagram arrives whole or not at all;
// datagrams may be lost (verbs) or reordered, never duplicated or
// corrupted by the provider; the protocol above retries. Polled, never
// blocking: receive() is cheap when nothing arrived. Not thread-safe.
class Listener {
 public:
  virtual ~Listener() = default;
  // Opaque address to give peers (through the bootstrap).
  virtual std::vector<uint8_t> address() const = 0;
  // Largest datagram send() accepts (at least 128 bytes).
  virtual size_t maxDatagram() const = 0;
  // Resolves a peer listener's address once (like ibv_create_ah) and
  // returns the handle send() takes. Validates the blob (kProtocol).
  virtual Result<uint32_t> addPeer(std::span<const uint8_t> peerAddress) = 0;
  // Sends one datagram to peer `handle`. kAgain: no room right now (the
  // peer's inbox or our send queue is full), retry later; kPeerFailed: the
  // provider knows the peer is gone (shm: its process exited). Success
  // means queued, not delivered.
  virtual Status send(uint32_t handle, std::span<const uint8_t> datagram) = 0;
  // Takes the next datagram that arrived into `datagram`; false when none.
  virtual Result<bool> receive(std::vector<uint8_t>& datagram) = 0;
};

struct DomainOptions {
  // Names this job's shared resources (shm segment names); the bootstrap
  // supplies a job-unique value.
  std::string jobTag;
  // Device and port for verbs, e.g. "mlx5_0:1"; empty: the first active port.
  std::string device;
};

// A provider opened on one device: a protection domain plus the factories of
// the objects above. Not thread-safe unless stated (one thread at a time).
class Domain {
 public:
  virtual ~Domain() = default;
  virtual const Caps& caps() const = 0;
  // Registers caller memory. Fails (like ibv_reg_mr) when any page of the
  // range is not mapped.
  virtual Result<std::unique_ptr<MemoryRegion>> registerMemory(void* address, size_t length, uint32_t access) = 0;
  // Allocates page-aligned memory owned by the provider and registers it. On
  // shm it lives in shared memory that peers map, so one-sided access to it
  // is a plain copy; pools, eager rings and pack buffers use this.
  virtual Result<std::unique_ptr<MemoryRegion>> allocateMemory(size_t length, uint32_t access) = 0;
  virtual Result<std::unique_ptr<CompletionQueue>> createCompletionQueue(uint32_t depth) = 0;
  virtual Result<std::unique_ptr<Endpoint>> createEndpoint(CompletionQueue& sendQueue, CompletionQueue& recvQueue,
                                                          const EndpointOptions& options) = 0;
  // A key to [address, address + length) inside `region` (memory from
  // allocateMemory of this domain) with `access` (remote bits only), valid
  // only for the peer of `peer` (a connected endpoint of this domain): as an
  // HCA's type-2 memory window bound on that queue pair. The returned
  // region's lkey is `region`'s. Destroying it revokes the key before it
  // returns. `region` and `peer` must outlive it, or the endpoint's
  // destruction revokes it first. kUnsupported unless caps().memoryWindows.
  virtual Result<std::unique_ptr<MemoryRegion>> bindWindow(const MemoryRegion& region, void* address, size_t length,
                                                           uint32_t access, Endpoint& peer) {
    (void)region, (void)address, (void)length, (void)access, (void)peer;
    return makeError(Code::kUnsupported, "provider ", caps().provider, " has no memory windows");
  }
  // Creates a connection inbox (see Listener). kUnsupported by default.
  virtual Result<std::unique_ptr<Listener>> createListener() {
    return makeError(Code::kUnsupported, "provider ", caps().provider, " has no connection listener");
  }
};

struct ProviderInfo {
  std::string name;
  bool available = false;
  std::string detail;  // devices found, or why it is unavailable
};

// The providers compiled in, and whether each can be opened here.
std::vector<ProviderInfo> probeProviders();

// Opens a provider by name ("shm", "verbs"), or "auto": verbs when an active
// RDMA port exists, else shm. IBDT_PROVIDER overrides "auto".
Result<std::unique_ptr<Domain>> openDomain(std::string_view provider, const DomainOptions& options);

}  // namespace ibdt::fabric
