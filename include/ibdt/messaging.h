// ibdt/messaging.h — tagged point-to-point messages of derived datatypes.
//
// A Context joins one process to the job: it owns an RC endpoint to each
// rank it talks to (itself included) and moves messages by the Wu/Wyckoff/Panda schemes.
//   * Eager (packed bytes <= eagerLimit): packed straight into a
//     pre-registered eager buffer, unpacked straight out of the receiver's
//     one; credit-based flow control per peer.
//   * Pipelined eager (eagerLimit < packed bytes <= pipelineLimit, no
//     scheme forced): the same buffers, the message cut into fragments that
//     leave back to back with no handshake, so the receiver unpacks one
//     fragment while the next is written. A sender with large blocks
//     gathers them straight from the user buffer into the peer's eager
//     buffer (no pack copy); one with small blocks packs each fragment.
//   * Rendezvous: the RTS carries the sender's datatype statistics; the
//     receiver answers with an unpack buffer or with its user buffer's
//     remote key and layout (sent once per (type id, version), then cached by
//     the sender); the sender finalises the scheme by the paper's Table 1:
//     BC-SPUP, RWG-UP, Multi-W or P-RRS, or plain zero-copy when both sides
//     are contiguous.
//
// Semantics follow MPI point-to-point: envelopes (source, tag, communicator
// context id), kAnySource / kAnyTag, non-overtaking order per (source, tag,
// communicator), an unexpected-message queue, truncation (the bytes that fit
// are delivered, nothing beyond the receive buffer is written, the receive
// completes with Code::kTruncated), cancel of a receive not yet matched.
//
// Connections (Options::connect, IBDT_MSG_CONNECT): eagerly, create()
// connects an RC endpoint to every rank; lazily, create() only publishes a
// connection listener per rank (one small allgather) and the endpoint pair
// to rank p is set up by the first message to or from p: the sender asks
// p's listener, p answers with its endpoint's address, messages queued
// meanwhile leave in order once it is up. When two ranks connect to each
// other at once, the lower rank's request wins, so there is one pair.
// A peer that does not answer within connectTimeoutMs (or is known dead)
// fails what was queued for it, and nothing else. kAuto connects eagerly up
// to kEagerConnectRanks ranks and lazily above (as MVAPICH and UCX connect
// on demand in large jobs: most ranks of a large job talk to few others).
// Staging buffers come from the shared buffer pool (IBDT_POOL_*); user
// buffers used in place are registered as one span through the pin-down
// cache (IBDT_REG_CACHE*).
//
// Progress is explicit: test(), wait(), waitAll() and progress() drive it.
// There is no progress thread. A peer whose endpoint fails (it died, or sent
// malformed control data) fails every operation involving it; the others go
// on. Threads: one thread at a time may use a Context (MPI_THREAD_SERIALIZED).
//
// Shutdown: close() completes this rank's pending sends, returns owed
// credits, and tells every connected peer "nothing more from me", waiting
// until each of them has said the same; the Context may then be destroyed
// with no barrier, as every peer's traffic to it has ended. As with
// MPI_Finalize, every message must have been received before close (a
// receive still posted then completes with kCancelled). Destroying a Context
// without close() is safe for this process, but a peer still exchanging with
// it sees it fail.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ibdt/datatype.h"
#include "ibdt/deadline.h"
#include "ibdt/fabric.h"
#include "ibdt/status.h"

namespace ibdt::bootstrap {
class Store;
}

namespace ibdt::messaging {

inline constexpr int32_t kAnySource = -1;
inline constexpr int32_t kAnyTag = -1;

// How a message travels. kAuto lets the rendezvous handshake choose.
enum class Scheme : uint8_t {
  kAuto,
  kEager,       // one copy per side through eager buffers
  kContiguous,  // both sides contiguous: one RDMA write, zero copy
  kGeneric,     // pack whole message, write it, unpack whole (the baseline)
  kBcSpup,      // segment pack -> WRITE_WITH_IMM -> segment unpack, pipelined
  kRwgUp,       // write-gather from user blocks -> segment unpack
  kPRrs,        // sender packs; receiver READs with scatter into user blocks
  kMultiW,      // one write per matching pair of blocks, zero copy
  kPipelined,   // eager fragments back to back, no handshake (mid-size messages)
};
inline constexpr int kSchemeCount = 9;
std::string_view schemeName(Scheme scheme);
// Parses "auto", "eager", "contig", "generic", "bc-spup", "rwg-up", "p-rrs", "multi-w",
// "pipelined".
Result<Scheme> parseScheme(std::string_view name);

// Communicator ids from here up carry exchange traffic, where every rank
// sends and receives at once (the collectives take theirs from here). The
// pipelined eager path's two copies overlap only while the peer's core is
// free, so on these communicators a contiguous message of at least
// Options::exchangeZeroCopyMin bytes goes by rendezvous, and a contiguous
// receive takes it by the single-copy contiguous path.
inline constexpr uint32_t kFirstExchangeCommunicator = 0x8000'0000u;

// When endpoints to the other ranks are set up (see above).
enum class Connect : uint8_t { kAuto, kEager, kLazy };
inline constexpr int kEagerConnectRanks = 16;  // kAuto: eager up to this many ranks

struct Options {
  int64_t eagerLimit = 32768;     // largest packed message sent eagerly
  // Eager receive buffers per peer, at most: create() lowers it (to no
  // fewer than 2) so that all peers' buffers fit IBDT_MSG_EAGER_MEMORY
  // (16 MiB by default; read at create(), also for Options built in code).
  uint32_t eagerCredits = 32;
  // Largest packed message sent as pipelined eager fragments (above
  // eagerLimit); larger ones, and all when a scheme is forced, rendezvous.
  int64_t pipelineLimit = 262144;
  // With a tuning file in force, pipelined eager vs rendezvous is the file's
  // decision per message unless this is set (IBDT_MSG_PIPELINE_LIMIT set).
  bool pipelineLimitForced = false;
  // Measured cost model (docs/tuning.md): "" or "off": none, the built-in
  // choices; "auto": the per-host file ibdt-tune writes; else its path.
  // optionsFromEnvironment() takes IBDT_TUNE_FILE (default auto).
  std::string tuneFile;
  // Exchange communicators (kFirstExchangeCommunicator): contiguous messages
  // from this size up go single-copy (0: never; measured crossover 64 KiB).
  int64_t exchangeZeroCopyMin = 65536;
  // With a tuning file in force the file's fits decide exchangeZeroCopyMin
  // unless this is set (IBDT_MSG_EXCHANGE_ZERO_COPY set).
  bool exchangeZeroCopyForced = false;
  // Node-local collectives through shared memory (the call mailbox): dense
  // blocks from this size up are read straight out of the writer's buffer
  // by cross-memory attach, one copy instead of two; 0: never; <0: the cost
  // model's crossover on this machine (Context::singleCopyReadMin).
  int64_t singleCopyReadMin = -1;
  int64_t segmentSize = 0;        // pipeline unit of BC-SPUP and RWG-UP (0: by message size)
  uint32_t ringSegments = 4;      // their staging buffer: a ring of this many segments
  Scheme forcedScheme = Scheme::kAuto;  // rendezvous scheme for all above eagerLimit (kAuto: by size, Table 1)
  // Mean block size (bytes) below which a side packs (sender) or unpacks
  // (receiver) instead of using its blocks directly; <0: from the cost model
  // (for the receiver: the model compares the schemes for each message).
  double packBelowBlock = -1;
  double unpackBelowBlock = -1;
  bool listPost = true;           // post rendezvous writes as chained lists
  // Pauses a wait spins before it yields the core; <0: 4096 when this node
  // runs no more ranks than it has cores, else 0 (yield after every empty poll).
  int64_t spins = -1;
  // Endpoints at create() or on first use; kAuto: IBDT_MSG_CONNECT decides
  // (its own auto: eager up to kEagerConnectRanks ranks).
  Connect connect = Connect::kAuto;
  // Lazy: a peer that does not answer a connection request within this
  // fails (it died, or does not call into the library for that long).
  int64_t connectTimeoutMs = 60000;
  // Bytes of messages that arrived before their receive this context holds
  // before it stops returning eager credits: beyond it senders wait (their
  // messages stay queued at their side) until receives drain the queue.
  // Exceeded by at most one peer's credits of eager buffers per peer.
  int64_t unexpectedMaxBytes = int64_t{64} << 20;
};
// Options from the IBDT_MSG_* environment variables (see README).
Result<Options> optionsFromEnvironment();
// kInvalidArgument, naming IBDT_MSG_EAGER_LIMIT and the minimum, when an
// eager limit is too small for the control messages (Context::create checks
// Options built by hand with it too).
Status checkEagerLimit(int64_t eagerLimit);

// How the ranks of the job find each other. The bootstrap Store provides
// this (rank, size, allgather); tests may run ranks as threads.
struct Bootstrap {
  int rank = 0;
  int size = 1;
  // Collective: every rank contributes bytes, all receive all, by rank.
  std::function<Result<std::vector<std::vector<uint8_t>>>(std::span<const uint8_t>)> allgather;
  // Ranks on this node (0: unknown, taken as `size`). With no more ranks
  // than cores, waits spin longer before they yield (IBDT_MSG_SPIN).
  int localSize = 0;
};

// What a completed receive got.
struct RecvInfo {
  int32_t source = 0;
  int32_t tag = 0;
  int64_t bytes = 0;         // packed bytes delivered
  int64_t messageBytes = 0;  // packed bytes sent (> bytes when truncated)
  Scheme scheme = Scheme::kEager;
};

// Cost-model parameters and choices, readable for tools and benchmarks.
struct Counters {
  uint64_t schemeCount[kSchemeCount] = {};
  uint64_t layoutsSent = 0;        // receiver layouts put on the wire
  uint64_t layoutCacheHits = 0;    // rendezvous that reused a cached layout
  uint64_t poolGrowths = 0;        // times the staging pool allocated and registered more
  uint64_t unexpected = 0;         // messages that arrived before their receive
  uint64_t unexpectedBytes = 0;    // bytes those held now (payloads and bookkeeping)
  uint64_t unexpectedBytesPeak = 0;
  uint64_t creditsWithheld = 0;    // eager buffers not returned: over Options::unexpectedMaxBytes
  uint64_t connections = 0;        // endpoint pairs set up to other ranks
  uint64_t peersVisited = 0;       // peers progress() walked for work to send (only those with some)
  uint64_t creditsGranted = 0;     // IBDT_MSG_EAGER_POOL: pool buffers granted to peers beyond their share
  uint64_t creditsTakenBack = 0;   // IBDT_MSG_EAGER_POOL: buffers of peers kept back in the pool
  uint64_t creditsGivenBack = 0;   // IBDT_MSG_EAGER_POOL: credits we gave back to peers that asked
  uint64_t creditMessages = 0;     // credit-only messages sent (credits no other message could carry)
};

struct Operation;

// A pending send or receive. Cheap to move; completes through Context. A
// persistent one (sendInit/recvInit) stays valid after it completes and is
// run again by Context::start().
class Request {
 public:
  Request() = default;
  bool valid() const { return op_ != nullptr; }
  bool persistent() const { return persistent_; }

 private:
  friend class Context;
  Request(std::shared_ptr<Operation> op, bool persistent) : op_(std::move(op)), persistent_(persistent) {}
  std::shared_ptr<Operation> op_;
  bool persistent_ = false;
};

class ContextImpl;
struct Tuning;  // transport/messaging/tuning.h (internal)

class Context {
 public:
  // Creates endpoints to every rank and exchanges their addresses through
  // `bootstrap` (collective over all ranks). `domain` must outlive it.
  static Result<std::unique_ptr<Context>> create(fabric::Domain& domain, const Bootstrap& bootstrap,
                                                 const Options& options);
  // The same through the job's Store (collective; waits until `deadline`).
  static Result<std::unique_ptr<Context>> create(fabric::Domain& domain, bootstrap::Store& store,
                                                 const Options& options, Deadline deadline);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int rank() const;
  int size() const;

  // Starts sending count x type from buf. The buffer must stay untouched
  // until the request completes.
  Result<Request> isend(const void* buf, int64_t count, const datatype::Datatype& type, int dest, int tag,
                        uint32_t communicator = 0);
  // Starts receiving into count x type at buf; source may be kAnySource,
  // tag kAnyTag.
  Result<Request> irecv(void* buf, int64_t count, const datatype::Datatype& type, int source, int tag,
                        uint32_t communicator = 0);

  // MPI_Send_init / MPI_Recv_init: a persistent request with the arguments
  // checked and the type's segment prepared once, created inactive. start()
  // posts it; test()/wait() complete it and leave it valid and inactive for
  // the next start(), which allocates nothing (unless a protocol still holds
  // the last run, then it copies). wait() or test() on an inactive request
  // returns its last outcome at once; cancel() works as for irecv.
  Result<Request> sendInit(const void* buf, int64_t count, const datatype::Datatype& type, int dest, int tag,
                           uint32_t communicator = 0);
  Result<Request> recvInit(void* buf, int64_t count, const datatype::Datatype& type, int source, int tag,
                           uint32_t communicator = 0);
  // Persistent one-sided puts (docs/alltoall-direct-writes.md). The target
  // calls exposeInit: it registers [buf, buf + bytes) for remote writes
  // (through the pin-down cache) and sends `origin` its key in a message
  // with `tag`, driving progress until the key has left (until `deadline`:
  // over a lazy connection that needs the origin's progress too, which its
  // putInit provides); the result is a persistent request whose run completes when
  // a run of the origin's put has landed in the buffer. The origin calls
  // putInit with the same bytes, tag and communicator: it registers its
  // buffer and waits (until `deadline`) for the key; each run of the result
  // writes the whole buffer into the target's with RDMA WRITEs and then
  // sends a zero-byte message with `tag`, which the target's exposure run
  // receives. Nothing is registered or allocated at start. The caller must
  // order the runs: an origin starts a put only once the target has started
  // its exposure (a "ready" message, say), and, when two ranks put to each
  // other on one tag, both finish putInit before either starts its
  // exposure (the key and the notification share the tag). kInvalidArgument
  // when the lengths differ; a registration failure is returned as is.
  Result<Request> exposeInit(void* buf, int64_t bytes, int origin, int tag, uint32_t communicator = 0,
                             Deadline deadline = Deadline::never());
  Result<Request> putInit(const void* buf, int64_t bytes, int target, int tag, uint32_t communicator = 0,
                          Deadline deadline = Deadline::never());
  // A target buffer's key as it travels (address, length, rkey).
  static constexpr size_t kOneSidedKeyBytes = 24;
  using OneSidedKey = std::array<uint8_t, kOneSidedKeyBytes>;
  // Moves an inactive put or exposure to `buf`, of the same length,
  // registering it (the pin-down cache: a buffer used before costs a
  // lookup), without any message: a put's origin changes alone. Returns an
  // exposure's key, which its origin must then get (retargetPut) before its
  // next put, e.g. in a message the caller sends anyway (the direct-write
  // alltoall's "ready"); the same buffer again only returns the key.
  // kState while the request runs.
  Result<OneSidedKey> rebindOneSided(Request& request, const void* buf);
  // Points an inactive put at the target buffer `key` (rebindOneSided's
  // result on the target): kInvalidArgument when its length is not the
  // put's, or the key is malformed.
  Status retargetPut(Request& put, std::span<const uint8_t> key);

  // Runs a persistent request once more: kState while its last run is still
  // active. A peer already failed: that error, and the request stays inactive.
  Status start(Request& request);

  // Drives progress once; true when the request completed (its status
  // returned by wait). Does not block.
  Result<bool> test(Request& request, RecvInfo* info = nullptr);
  // Drives progress until the request completes; returns its outcome. The
  // request is released afterwards, unless it is persistent.
  Status wait(Request& request, RecvInfo* info = nullptr, Deadline deadline = Deadline::never());
  // Waits for all; returns the first error (every request is still waited for).
  Status waitAll(std::span<Request> requests, Deadline deadline = Deadline::never());
  // Cancels a receive that has not been matched yet: its wait() then
  // returns Code::kCancelled. A matched receive or a send is not cancelled
  // (returns kState) and completes normally.
  Status cancel(Request& request);

  Status send(const void* buf, int64_t count, const datatype::Datatype& type, int dest, int tag,
              uint32_t communicator = 0);
  Status recv(void* buf, int64_t count, const datatype::Datatype& type, int source, int tag,
              uint32_t communicator = 0, RecvInfo* info = nullptr);

  // Polls completions and advances every protocol once.
  Status progress();
  // Ok, or why rank `rank` failed (dead, its link broken), as far as
  // progress() has learnt: for waits outside the messaging layer (a
  // collective polling shared memory) that must not outlast a dead peer.
  Status peerStatus(int rank) const;

  // Ends this rank's part in the job's traffic (see the file comment):
  // waits until the sends are complete and every connected peer closed
  // too. kTimeout when that takes past `deadline` (the Context is then
  // still open). Afterwards isend/irecv fail with kState; destroy it.
  Status close(Deadline deadline = Deadline::never());
  bool closed() const;
  // How many pauses this Context's waits spin before they yield (Options::spins
  // resolved): for wait loops outside ibdt that should pace as its own waits.
  uint32_t waitSpins() const;

  const Counters& counters() const;
  // The sender's pack threshold (cost model or override); the receiver's
  // override, or -1 when the cost model decides per message.
  double packBelowBlock() const;
  double unpackBelowBlock() const;
  // Whether a contiguous message of `bytes` on `communicator` goes by the
  // single-copy rendezvous (exchange communicators, Options::exchangeZeroCopyMin
  // or the tuning file's choice), i.e. with a handshake, not eagerly.
  bool exchangeSingleCopy(uint32_t communicator, int64_t bytes) const;
  // Options::singleCopyReadMin resolved: the block size from which a
  // node-local collective reads a peer's dense block across processes
  // rather than copying it twice through shared memory; 0: never.
  int64_t singleCopyReadMin() const;
  // Which tuning file is in force, or why none is (docs/tuning.md).
  const std::string& tuningNote() const;
  // Internal, for the collectives' algorithm selection: the tuning file in
  // force, or null (built-in defaults).
  const Tuning* tuning() const;

 private:
  explicit Context(std::unique_ptr<ContextImpl> impl);
  std::unique_ptr<ContextImpl> impl_;
};

}  // namespace ibdt::messaging
