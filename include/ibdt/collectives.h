// ibdt/collectives.h — collective exchanges over a messaging Context.
//
// A Communicator is the ranks of the job seen through one Context, with a
// communicator context id of its own, so collective traffic never matches a
// user's point-to-point receive (user messages keep ids below
// kFirstExchangeCommunicator), and the node map (node id, local rank of every
// rank) used by node-aware algorithms.
//
// Every algorithm compiles into a Plan (docs/design.md, "Collectives"): init
// checks the arguments once and precomputes the per-round peers and buffer
// offsets; start() posts the first rounds and returns; test() and wait()
// progress it. A plan may be started again once it completed, with the same
// buffers and types, and then constructs no types, checks nothing again and
// allocates no messaging operation (its rounds are persistent requests; the
// blocking call is init + start + wait). As with MPI's persistent
// collectives, every rank creates its plans on a communicator in the same
// order: a plan's messages carry a tag taken from the communicator at init.
//
// Semantics follow MPI_Alltoall: rank i sends sendcount x sendtype found at
// sendbuf + j * sendcount * extent(sendtype) to rank j, which receives it
// into recvbuf + i * recvcount * extent(recvtype). The type signatures of
// every pair must be equal; a rank whose own send and receive signatures
// differ fails at init, and a message whose signature differs from what its
// receiver expects fails that receive with an error naming the peer (the
// plan still runs every other round, so no rank is left waiting). Send and
// receive buffers must not overlap, except through kInPlace.
//
// Algorithms (docs/alltoall-bruck.md): pairwise (p - 1 direct rounds) and
// Bruck's ceil(log_r p) rounds in four forms (Träff, Rougier, Hunold 2014):
// basic (bounded vector, final permutation), modified (circular vector, no
// permutation), zero-copy (blocks sent straight from the send buffer,
// received alternately into the receive and an intermediate buffer) and
// radix-r (the modified form with r - 1 messages per round).
//
// Alltoallv (docs/alltoallv.md) follows MPI_Alltoallv with 64-bit counts
// and displacements per peer, and kInPlace for one buffer whose outgoing
// blocks are replaced by the incoming ones (Hofmann/Rünger's algorithm with
// auxiliary memory of a fixed size), or zero-copy Bruck for small blocks.
//
// One-sided writes (docs/alltoall-direct-writes.md): the alltoall and
// alltoallv algorithm direct-write, forced or chosen by kAuto in a
// collective init. Communicator::algorithmCounts() counts the choices
// (printed with IBDT_STATS=1).
//
// Threads: a Communicator and its Plans are used by one thread at a time,
// like their Context.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ibdt/datatype.h"
#include "ibdt/deadline.h"
#include "ibdt/messaging.h"
#include "ibdt/status.h"

namespace ibdt::bootstrap {
class Store;
}

namespace ibdt::collectives {

// Communicator context ids from messaging::kFirstExchangeCommunicator up
// belong to collectives (exchange traffic).
using messaging::kFirstExchangeCommunicator;

// Where a rank runs.
struct NodeInfo {
  int nodeId = 0;
  int localRank = 0;
};

class Communicator;

// How often each algorithm was built on a communicator (IBDT_STATS=1
// prints them when the communicator goes away): plans per collective
// ("alltoall", "alltoallv") and algorithm (Plan::algorithm(), the one that
// runs: a direct-write that fell back runs pairwise), and how many of those
// kAuto chose.
struct AlgorithmCount {
  uint64_t plans = 0;
  uint64_t chosenByAuto = 0;
  bool operator==(const AlgorithmCount&) const = default;
};
using AlgorithmCounts = std::map<std::string, std::map<std::string, AlgorithmCount, std::less<>>, std::less<>>;
// "alltoall: pairwise 3 (auto 3), direct-write 1 (auto 1); alltoallv: ..."
std::string describe(const AlgorithmCounts& counts);

// split(): the colour of a rank that joins no communicator (MPI_UNDEFINED).
inline constexpr int kUndefinedColour = -1;

// splitByNode(): this rank's node, and the leaders across nodes.
struct NodeSplit {
  std::unique_ptr<Communicator> node;     // the ranks of this rank's node
  std::unique_ptr<Communicator> leaders;  // local ranks < leadersPerNode of every node; null elsewhere
};

class Communicator {
 public:
  // All ranks of `context`; nodeMap[r] tells where rank r runs (empty: all
  // on one node, local rank = rank). `contextId` must be at least
  // kFirstExchangeCommunicator and the same on every rank; two communicators
  // alive over one Context need different ids. Communicators split from
  // this one take ids from contextId + 1 up (at most kMaxSplitIds of them),
  // so give two communicators created over one Context ids at least that
  // far apart.
  static Result<std::unique_ptr<Communicator>> create(messaging::Context& context, std::vector<NodeInfo> nodeMap = {},
                                                      uint32_t contextId = kFirstExchangeCommunicator);
  // The same with the node map gathered from the job's Store (collective).
  static Result<std::unique_ptr<Communicator>> create(messaging::Context& context, bootstrap::Store& store,
                                                      Deadline deadline,
                                                      uint32_t contextId = kFirstExchangeCommunicator);
  static constexpr uint32_t kMaxSplitIds = 1u << 16;

  // MPI_Comm_split (collective over this communicator): the ranks with
  // the same `colour` form a communicator, ordered by `key`, then by rank
  // here. kUndefinedColour: this rank joins none (the result is null). Its
  // context id is one more than the highest any member has used in this
  // communicator's family, agreed in the same allgather (the scheme:
  // docs/alltoall-hierarchical.md, "Context ids").
  // The Context must outlive the result (this communicator need not);
  // node(r) keeps node ids, local ranks are renumbered among the members on
  // each node.
  Result<std::unique_ptr<Communicator>> split(int colour, int key, Deadline deadline = Deadline::never());
  // MPI_Comm_split_type(SHARED) and the leaders' communicator (the first
  // `leadersPerNode` local ranks of every node), in one allreduce of the
  // context id (collective; membership follows from the node map).
  Result<NodeSplit> splitByNode(int leadersPerNode = 1, Deadline deadline = Deadline::never());

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(contextRanks_.size()); }
  // The Context rank of this communicator's rank `rank`: algorithms compute
  // peers as communicator ranks and address messages through this, so that
  // they run unchanged on a split communicator.
  int contextRank(int rank) const { return contextRanks_[static_cast<size_t>(rank)]; }
  uint32_t contextId() const { return contextId_; }
  messaging::Context& context() const { return *context_; }
  // Where communicator rank `rank` runs: the job's node id, and its local
  // rank among this communicator's ranks on that node.
  const NodeInfo& node(int rank) const { return nodes_[static_cast<size_t>(rank)]; }
  int nodeCount() const { return nodeCount_; }
  // This communicator's ranks on this rank's node.
  int localSize() const { return localSize_; }

  // The tag of the next plan (internal: algorithms take one at init).
  // Never one of the reserved tags below while no tag is pinned.
  int32_t takePlanTag();
  // Tags from kFirstReservedPlanTag up are never handed out by the counter.
  // While `tag` is pinned, every plan built on this communicator takes it,
  // and the counter does not move: a caller that runs its collectives one at
  // a time, each to completion (the MPI bridge's blocking alltoall), can
  // then build or reuse plans as it likes on each rank, since runs on one
  // tag match in order (non-overtaking), like one plan started again.
  static constexpr int32_t kFirstReservedPlanTag = INT32_MAX - 15;
  void pinPlanTag(int32_t tag) { pinnedTag_ = tag; }
  void unpinPlanTag() { pinnedTag_ = -1; }
  // A pinned tag means plans may be built on one rank and not another, so
  // kAuto then chooses only algorithms whose init is local.
  bool planTagPinned() const { return pinnedTag_ >= 0; }
  int32_t pinnedPlanTag() const { return pinnedTag_; }

  // The algorithms plans were built with (see AlgorithmCounts); counted by
  // the collectives at init.
  const AlgorithmCounts& algorithmCounts() const { return counts_; }
  void countAlgorithm(std::string_view collective, std::string_view algorithm, bool chosenByAuto);
  ~Communicator();  // IBDT_STATS=1: prints algorithmCounts()

  // Internal: what the blocking alltoallv keeps between calls on one node
  // (collectives/alltoallv_mailbox_calls.h), made by its first call.
  struct AlltoallvCalls;
  std::unique_ptr<AlltoallvCalls>& alltoallvCalls() { return alltoallvCalls_; }

 private:
  struct IdFamily;  // the ids this rank's communicators split from one root use
  Communicator(messaging::Context& context, std::vector<int> contextRanks, std::vector<NodeInfo> nodes,
               uint32_t contextId, std::shared_ptr<IdFamily> family);
  messaging::Context* context_;
  std::vector<int> contextRanks_;
  std::vector<NodeInfo> nodes_;
  uint32_t contextId_;
  std::shared_ptr<IdFamily> family_;
  int rank_ = 0;
  int nodeCount_ = 1;
  int localSize_ = 1;
  int32_t nextTag_ = 0;
  int32_t pinnedTag_ = -1;
  AlgorithmCounts counts_;
  bool printStats_ = false;  // IBDT_STATS, read at creation
  std::unique_ptr<AlltoallvCalls> alltoallvCalls_;
};

class PlanImpl;  // collectives/plan_impl.h: one subclass per algorithm

// A compiled collective (see the file comment).
class Plan {
 public:
  Plan();
  explicit Plan(std::unique_ptr<PlanImpl> impl);
  ~Plan();  // an active plan cancels its unmatched receives
  Plan(Plan&&) noexcept;
  Plan& operator=(Plan&&) noexcept;

  bool valid() const { return impl_ != nullptr; }
  // Starts a run; kState while the previous one is still active.
  Status start();
  // Progresses once; true when the run completed (its outcome: wait(),
  // which then returns at once). `progressed` (if given): whether something
  // completed or was posted, as a caller's own wait loop resets its backoff
  // on (the MPI bridge's MPI_Wait).
  Result<bool> test(bool* progressed = nullptr);
  // Progresses until the run completes; returns its first error (every
  // round still ran), or kTimeout at `deadline` (the run stays active).
  Status wait(Deadline deadline = Deadline::never());
  bool active() const;
  // Moves an inactive plan to other send and receive buffers with the same
  // layout (every block at the same offset from its buffer), locally: no
  // rank is told or waits, yet the peers' next runs reach the new buffers.
  // Direct-write plans can (their "ready" message carries the receive
  // buffer's key every run) and shared-memory ones (no peer knows the
  // buffers); kUnsupported for the others; kState while active.
  Status rebind(const void* sendbuf, void* recvbuf);
  // The same with other counts and types, as alltoallInit takes them, whose
  // blocks hold as many packed bytes as the plan's (the signature is the
  // caller's to keep matching the peers', as in MPI): only shared-memory
  // all-to-all plans, whose packing is each rank's own; kUnsupported for the
  // others, kInvalidArgument for other block sizes or in place changing.
  Status rebind(const void* sendbuf, int64_t sendcount, const datatype::Datatype& sendtype, void* recvbuf,
                int64_t recvcount, const datatype::Datatype& recvtype);
  // "pairwise", ...
  std::string_view algorithm() const;
  // Largest scratch the algorithm itself held at once, in bytes, over the
  // plan's life (auxiliary buffers and per-peer bookkeeping; messaging's own
  // staging is not counted): what an in-place alltoallv costs beyond the
  // caller's buffer, or a Bruck algorithm's intermediate buffer.
  int64_t peakExtraBytes() const;

 private:
  std::unique_ptr<PlanImpl> impl_;
  bool started_ = false;
};

// kAuto: the algorithm (and radix) an α-β cost model prices cheapest for p
// and the block size, fitted by ibdt-tune on this machine (the Context's
// tuning file) or built in (docs/alltoall-selection.md); the same on every
// rank. Plan::algorithm() names the choice.
enum class AlltoallAlgorithm : uint8_t {
  kAuto,
  kPairwise,
  kBruckBasic,
  kBruckModified,
  kBruckZeroCopy,
  kBruckRadix,
  // Gather at leaders per node, leaders exchange, scatter (docs/alltoall-hierarchical.md).
  kHierarchical,
  // One-sided writes straight into the peers' receive buffers, their keys
  // exchanged at init (docs/alltoall-direct-writes.md); dense blocks only
  // (else every rank runs pairwise), not in place. kAuto picks it for
  // large blocks in a collective init (see alltoallInitIsCollective).
  kDirectWrite,
  // The ranks of one node through one shared-memory segment: each packs its
  // send buffer into its row, each copies its column out
  // (docs/alltoall-shared-memory.md). Collective init; one node only.
  kSharedMemory,
};
// "auto", "pairwise", "bruck-basic", "bruck-modified", "bruck-zero-copy",
// "bruck-radix", "hierarchical", "direct-write", "shared-memory"
// (IBDT_ALLTOALL_ALGORITHM's values).
std::string_view alltoallAlgorithmName(AlltoallAlgorithm algorithm);
Result<AlltoallAlgorithm> parseAlltoallAlgorithm(std::string_view name);

// How the hierarchical alltoall's leaders exchange between nodes.
enum class LeaderExchange : uint8_t { kAuto, kDirect, kBruck };
// "auto", "direct", "bruck" (IBDT_ALLTOALL_LEADER_EXCHANGE's values).
std::string_view leaderExchangeName(LeaderExchange exchange);

struct AlltoallOptions {
  AlltoallAlgorithm algorithm = AlltoallAlgorithm::kAuto;
  // Pairwise: at most this many rounds in flight (0: all at once).
  // Hierarchical with the direct leader exchange: at most this many node
  // pairs in flight per leader (0: all at once).
  int64_t throttle = 8;
  // Bruck radix-r: r >= 2 (r - 1 messages per round, ceil(log_r p) rounds;
  // r >= p is one round of p - 1 messages).
  int64_t radix = 4;
  // Hierarchical: ranks per node that exchange between nodes (the first
  // local ranks; fewer when a node has fewer ranks).
  int leaders = 1;
  // Hierarchical: how the leaders exchange between nodes
  // (docs/alltoall-hierarchical.md). Direct: one message per node pair, at
  // most `throttle` node pairs in flight per leader. Bruck: ceil(log2 N)
  // rounds among the N leaders (one leader per node only). Auto: what the
  // cost model prices cheaper for N nodes and the node-blocks' size (direct
  // with several leaders per node).
  LeaderExchange leaderExchange = LeaderExchange::kAuto;
};
// `options` with the algorithm `name` forced: a name of parseAlltoallAlgorithm, or
// "bruck-radix-<r>" (kBruckRadix with radix r in [2, 4096), no leading
// zero), as Plan::algorithm() names a radix-r plan.
Result<AlltoallOptions> withAlltoallAlgorithm(AlltoallOptions options, std::string_view name);
// Whether alltoallInit with these options communicates, so every rank must
// call it together (as MPI_Alltoall_init): hierarchical (it splits the
// communicator), direct-write (it exchanges keys), and kAuto across nodes (the ranks agree on the choice,
// their tuning files may differ). kAuto on one node chooses direct-write
// only where its init is collective anyway: an alltoallInit while no plan
// tag is pinned (MPI_Alltoall_init: every rank calls it together), or the
// blocking alltoall() (every rank calls it together; only when the tuning
// file measured direct-write's init, which it then pays per call), never a
// build under a pinned tag, whose init stays local
// (docs/alltoall-selection.md). Otherwise init is local.
bool alltoallInitIsCollective(const Communicator& comm, const AlltoallOptions& options);
// Options from IBDT_ALLTOALL_* (see README).
Result<AlltoallOptions> alltoallOptionsFromEnvironment();

// MPI_IN_PLACE: passed as alltoall's sendbuf, the blocks to send are taken
// from recvbuf (recvcount x recvtype per peer) and replaced there by the
// received ones; sendcount and sendtype are ignored. Extra memory stays
// bounded (docs/alltoall-bruck.md): pairwise packs one block per round in
// flight, basic and modified Bruck permute through their p/2-block
// intermediate buffer, zero-copy stages the p send blocks once per run,
// hierarchical stages 2p blocks per rank (and its leaders' node-blocks) in
// place or not (docs/alltoall-hierarchical.md). A
// sendbuf equal to recvbuf (when bytes move) is an error: use kInPlace.
extern const std::byte kInPlaceMarker;
inline constexpr const void* kInPlace = &kInPlaceMarker;

// MPI_Alltoall_init. The buffers, `comm` and its Context must outlive the
// plan; the types are held by the plan.
Result<Plan> alltoallInit(Communicator& comm, const void* sendbuf, int64_t sendcount,
                          const datatype::Datatype& sendtype, void* recvbuf, int64_t recvcount,
                          const datatype::Datatype& recvtype, const AlltoallOptions& options = {});
// MPI_Alltoall: init + start + wait.
Status alltoall(Communicator& comm, const void* sendbuf, int64_t sendcount, const datatype::Datatype& sendtype,
                void* recvbuf, int64_t recvcount, const datatype::Datatype& recvtype,
                const AlltoallOptions& options = {}, Deadline deadline = Deadline::never());

// Irregular all-to-all (MPI_Alltoallv), docs/alltoallv.md. Rank i sends
// sendcounts[j] x sendtype found at sendbuf + sdispls[j] * extent(sendtype)
// to rank j, which receives it into recvbuf + rdispls[i] * extent(recvtype)
// (counts and displacements in elements, one entry per communicator rank).
// Pairs whose signatures differ fail on both ranks with an error naming the
// peer; the other pairs still exchange. Checked before anything is sent:
// negative counts, receive blocks that overlap (by their [lb, ub) ranges),
// offsets or totals that overflow 64 bits, null buffers with bytes to move,
// uncommitted types.
//
// In place: pass kInPlace as sendbuf. recvbuf is then the one buffer; the
// outgoing blocks are sendcounts/sdispls and the incoming ones
// recvcounts/rdispls, both in elements of recvtype (sendtype is ignored),
// with no rule tying the two together (unlike MPI_IN_PLACE, whose counts
// must be symmetric). Outgoing blocks must not overlap each other, nor
// incoming ones each other; recvtype must be dense (one element is size()
// contiguous bytes, lb 0). Memory beyond the buffer: the auxiliary buffers
// (AlltoallvOptions::inplaceBytes) plus O(p) bookkeeping, whatever the
// counts (Plan::peakExtraBytes()). sendbuf == recvbuf without kInPlace is
// refused when bytes move.

// kBruckZeroCopy: ⌈log2 p⌉ messages instead of p - 1, each block forwarded
// up to log2 p times, so for small, not too irregular blocks. Its init is
// collective (the counts travel the Bruck rounds once, every block's size is
// checked at its destination) and needs every rank's send and receive types
// to consist of one basic kind, the same on all ranks (else
// kInvalidArgument on every rank); not in place.
// kDirectWrite: every pair by one-sided writes into the peers' receive
// blocks (docs/alltoall-direct-writes.md); init is collective, dense types
// only (else every rank runs pairwise), not in place; pairs are checked by
// length only, a mismatch fails every rank's init.
// kSharedMemory: the ranks of one node through one shared segment
// (docs/alltoall-shared-memory.md): each rank packs its outgoing blocks into
// its row, the others copy theirs out; no message. Init is collective (the
// pairs' bytes and signatures are checked there: a mismatch fails every
// rank's init, naming the pair); any types; in place too, where the extra
// memory is the rank's share of the segment (a line and twice its
// outgoing bytes) instead of inplaceBytes.
// kAuto (docs/alltoallv.md, "Automatic choice"): alltoallvInit, not in place
// and with no plan tag pinned, is collective: one allreduce of the smallest
// and largest block, the largest bytes a rank moves, whether the types
// consist of one basic kind and whether they are dense, then the alltoall
// cost model picks pairwise, bruck-zero-copy, direct-write or (on one node)
// shared-memory, the same on every rank. In place, alltoallvInit on one node
// with no tag pinned runs shared-memory when every rank's share fits its
// inplaceBytes (one allgather decides), else the in-place algorithm. The
// blocking alltoallv() on one node (no tag pinned) runs through the
// communicator's mailbox (docs/alltoall-shared-memory.md, "The mailbox"):
// no plan and no vote per call; the communicator's first blocking call
// makes it (collective), with rows of that call's inplaceBytes / 2, and a
// call whose blocks do not fit some rank's row runs as below. Elsewhere the
// blocking call (a plan per call, where the agreement would cost more than
// it saves) and a build under a pinned tag run pairwise, or the in-place
// algorithm in place.
enum class AlltoallvAlgorithm : uint8_t {
  kAuto,
  kPairwise,
  kInPlaceLimited,
  kBruckZeroCopy,
  kDirectWrite,
  kSharedMemory
};

struct AlltoallvOptions {
  // kAuto: see above; in place when sendbuf is kInPlace.
  AlltoallvAlgorithm algorithm = AlltoallvAlgorithm::kAuto;
  // Pairwise: at most this many rounds in flight (0: all at once).
  int64_t throttle = 8;
  // In place: auxiliary memory a in bytes (at least one element) split into
  // b = inplaceBuffers buffers (0: max(1, p / 8)).
  int64_t inplaceBytes = int64_t{1} << 20;
  int64_t inplaceBuffers = 0;
  // kAuto out of place: the most extra memory per rank the chosen algorithm
  // may hold (0: no bound). The one-node shared segment holds twice the
  // busiest rank's outgoing bytes, zero-copy Bruck up to p - 1 of the
  // largest blocks; pairwise and direct-write hold bookkeeping only. The
  // smallest bound any rank sets applies to all.
  int64_t scratchBytes = 0;
};
// Options from IBDT_ALLTOALL_THROTTLE and IBDT_ALLTOALLV_* (see README):
// IBDT_ALLTOALLV_ALGORITHM is auto, pairwise, bruck-zero-copy, direct-write
// or shared-memory.
Result<AlltoallvOptions> alltoallvOptionsFromEnvironment();

// MPI_Alltoallv_init. The buffers, the count and displacement arrays' values
// (copied at init), `comm` and its Context must outlive the plan.
Result<Plan> alltoallvInit(Communicator& comm, const void* sendbuf, std::span<const int64_t> sendcounts,
                           std::span<const int64_t> sdispls, const datatype::Datatype& sendtype, void* recvbuf,
                           std::span<const int64_t> recvcounts, std::span<const int64_t> rdispls,
                           const datatype::Datatype& recvtype, const AlltoallvOptions& options = {});
// MPI_Alltoallv: init + start + wait.
Status alltoallv(Communicator& comm, const void* sendbuf, std::span<const int64_t> sendcounts,
                 std::span<const int64_t> sdispls, const datatype::Datatype& sendtype, void* recvbuf,
                 std::span<const int64_t> recvcounts, std::span<const int64_t> rdispls,
                 const datatype::Datatype& recvtype, const AlltoallvOptions& options = {},
                 Deadline deadline = Deadline::never());

// Multiple alltoall (Jocksch, Kraushaar and Daverio, II-C): every row of a
// process grid runs its own MPI_Alltoall within `row` (this rank's row, a
// split of `comm`; the rows partition `comm`), and the rows' exchanges are
// merged node by node: one message per node pair and leader carries the
// blocks of every row (docs/alltoall-hierarchical.md). Collective over
// `comm`; options.leaders as for kHierarchical. Every rank's blocks must
// have one type signature (rows with different block sizes: one
// alltoallInit per row instead). Bad or mismatched arguments, or rows that
// do not partition `comm`, fail init on every rank.
Result<Plan> multipleAlltoallInit(Communicator& comm, Communicator& row, const void* sendbuf, int64_t sendcount,
                                  const datatype::Datatype& sendtype, void* recvbuf, int64_t recvcount,
                                  const datatype::Datatype& recvtype, const AlltoallOptions& options = {});
Status multipleAlltoall(Communicator& comm, Communicator& row, const void* sendbuf, int64_t sendcount,
                        const datatype::Datatype& sendtype, void* recvbuf, int64_t recvcount,
                        const datatype::Datatype& recvtype, const AlltoallOptions& options = {},
                        Deadline deadline = Deadline::never());

// Small collectives of `count` int64 values per rank, correct for any p;
// used by the algorithms themselves (agreements at init) and open to users.
// Plans like every collective: persistent, a started one allocates nothing.
enum class ReduceOp : uint8_t { kMin, kMax, kSum };  // kSum wraps (two's complement)
// recv[r * count + i] = value i of rank r; recv may alias send.
Result<Plan> allgatherInit(Communicator& comm, const int64_t* send, int64_t count, int64_t* recv);
// recv[i] = op over every rank's send[i], the same on every rank; recv may be send.
Result<Plan> allreduceInit(Communicator& comm, const int64_t* send, int64_t* recv, int64_t count, ReduceOp op);
// values[0 .. count) of `root` copied to every rank.
Result<Plan> broadcastInit(Communicator& comm, int64_t* values, int64_t count, int root);
// The same, blocking (init + start + wait).
Status allgather(Communicator& comm, const int64_t* send, int64_t count, int64_t* recv,
                 Deadline deadline = Deadline::never());
Status allreduce(Communicator& comm, const int64_t* send, int64_t* recv, int64_t count, ReduceOp op,
                 Deadline deadline = Deadline::never());
Status broadcast(Communicator& comm, int64_t* values, int64_t count, int root, Deadline deadline = Deadline::never());

// MPI_Barrier_init: returns on no rank before every rank has started it
// (dissemination, ceil(log2 p) rounds of empty messages).
Result<Plan> barrierInit(Communicator& comm);
// MPI_Barrier: init + start + wait.
Status barrier(Communicator& comm, Deadline deadline = Deadline::never());

}  // namespace ibdt::collectives
