// Alltoall by one-sided writes (docs/alltoall-direct-writes.md).
//
// Init registers this rank's send and receive buffers once (the pin-down
// cache: a plan built again on the same buffers registers nothing) and
// hands every peer the key of its receive block (Context::exposeInit /
// putInit). A run then costs, per peer: a "ready" message from the
// receiver (its buffer may be overwritten now: the previous run's data has
// been consumed) carrying its receive block's 24-byte key, the sender's
// RDMA WRITE of the whole block into it, and a zero-byte notification
// behind the write. The block is copied once, by the NIC (or on shm by the
// sender's kernel copy), with no handshake per message and no staging.
// Because every ready carries the key, a rank may move its plan to other
// buffers alone (Plan::rebind, the MPI bridge's repeated MPI_Alltoall on
// reallocated buffers): its peers write where its next ready says.
#include "collectives/alltoall_direct_write.h"

#include <cstring>
#include <vector>

#include "base/copy_bytes.h"
#include "base/log.h"
#include "collectives/alltoall_pairwise.h"
#include "collectives/plan_trace.h"

namespace ibdt::collectives {
namespace {

using messaging::Request;

class DirectWriteAlltoall final : public PlanImpl {
 public:
  DirectWriteAlltoall(Communicator& comm, const void* sendbuf, void* recvbuf, std::vector<DirectBlock> blocks)
      : comm_(comm),
        ctx_(comm.context()),
        sendbuf_(static_cast<const std::byte*>(sendbuf)),
        recvbuf_(static_cast<std::byte*>(recvbuf)),
        blocks_(std::move(blocks)),
        peers_(blocks_.size()) {}

  // `agreeLengths`: one more allreduce, so that a pair whose lengths differ
  // (alltoallv's counts) fails every rank's init, not just the sender's.
  Status prepare(bool agreeLengths);
  Status start() override;
  Result<PollResult> poll() override;
  Status block(Deadline deadline) override;
  Status outcome() const override { return outcome_; }
  bool active() const override { return active_; }
  void abandon() override;
  Status rebind(const void* sendbuf, void* recvbuf) override;
  std::string_view algorithm() const override { return "direct-write"; }

 private:
  // The four persistent requests of one pair, in the order they complete.
  struct Pair {
    Request ready;     // receive: the peer may be written now
    Request put;       // our block into the peer's receive buffer
    Request exposure;  // receive: the peer's block landed in ours
    Request readySend;
    messaging::Context::OneSidedKey ownKey{};     // sent in our ready: where the peer writes
    messaging::Context::OneSidedKey peerKey{};    // received in the peer's ready
    messaging::Context::OneSidedKey targetKey{};  // the key our put writes to (all zero: none yet)
    bool readyPending = false, putPending = false, exposurePending = false, readySendPending = false;
    bool putStarted = false;
    bool readyOk = false;  // the ready arrived: the peer's buffer may be written
  };
  bool pending(const Pair& pair) const {
    return pair.readyPending || !pair.putStarted || pair.putPending || pair.exposurePending || pair.readySendPending;
  }
  void note(Status status, int peer, std::string_view what);
  void startRequest(Request& request, bool& pending, int peer, std::string_view what);
  Result<bool> collect(Request& request, bool& pending, int peer, std::string_view what);

  // The peer's key arrived with its ready: point the put at it if it moved.
  Status retarget(Pair& pair);

  Communicator& comm_;
  messaging::Context& ctx_;
  const std::byte* sendbuf_;  // the buffers the blocks lie in (rebind moves them)
  std::byte* recvbuf_;
  std::vector<DirectBlock> blocks_;  // by communicator rank
  std::vector<Pair> peers_;
  bool active_ = false;
  Status outcome_;
  PlanTracer tracer_;  // the writes, one round (the ready and the notification are control)
};

Status DirectWriteAlltoall::prepare(bool agreeLengths) {
  const int p = comm_.size(), rank = comm_.rank();
  const int32_t tag = comm_.takePlanTag();
  const uint32_t id = comm_.contextId();
  const auto byte = datatype::Datatype::of<std::byte>();
  // Every key goes out before any rank waits for one (putInit blocks).
  for (int offset = 1; offset < p; ++offset) {
    const int peer = (rank + offset) % p;
    Pair& pair = peers_[static_cast<size_t>(peer)];
    const DirectBlock& block = blocks_[static_cast<size_t>(peer)];
    IBDT_ASSIGN_OR_RETURN(pair.exposure,
                          ctx_.exposeInit(block.recv, block.recvBytes, comm_.contextRank(peer), tag, id));
    IBDT_ASSIGN_OR_RETURN(pair.ownKey, ctx_.rebindOneSided(pair.exposure, block.recv));  // its key, unmoved
    const auto keyBytes = static_cast<int64_t>(messaging::Context::kOneSidedKeyBytes);
    IBDT_ASSIGN_OR_RETURN(pair.readySend,
                          ctx_.sendInit(pair.ownKey.data(), keyBytes, byte, comm_.contextRank(peer), tag, id));
    IBDT_ASSIGN_OR_RETURN(pair.ready,
                          ctx_.recvInit(pair.peerKey.data(), keyBytes, byte, comm_.contextRank(peer), tag, id));
  }
  Status failed;  // every put still takes its key, so no peer's key stays unmatched
  for (int offset = 1; offset < p; ++offset) {
    const int peer = (rank + p - offset) % p;  // the order the peers sent their keys in
    const DirectBlock& block = blocks_[static_cast<size_t>(peer)];
    auto put = ctx_.putInit(block.send, block.sendBytes, comm_.contextRank(peer), tag, id);
    if (put.isOk()) peers_[static_cast<size_t>(peer)].put = std::move(*put);
    if (!put.isOk() && failed.isOk()) failed = put.status();
  }
  const DirectBlock& own = blocks_[static_cast<size_t>(rank)];
  if (own.sendBytes != own.recvBytes && failed.isOk()) {
    failed = makeError(Code::kInvalidArgument, "sends itself ", own.sendBytes, " bytes but receives ", own.recvBytes);
  }
  if (agreeLengths) {
    int64_t ok = failed.isOk() ? 1 : 0;
    IBDT_RETURN_IF_ERROR(allreduce(comm_, &ok, &ok, 1, ReduceOp::kMin));
    if (ok == 0 && failed.isOk()) failed = makeError(Code::kInvalidArgument, "a pair's lengths differ on another rank");
  }
  IBDT_RETURN_IF_ERROR(failed.withContext(strCat("direct-write rank ", rank)));
  peers_[static_cast<size_t>(rank)].putStarted = true;  // the own block is a local copy
  return Status::ok();
}

void DirectWriteAlltoall::note(Status status, int peer, std::string_view what) {
  if (outcome_.isOk()) outcome_ = status.withContext(strCat("alltoall (direct-write) ", what, " rank ", peer));
}

void DirectWriteAlltoall::startRequest(Request& request, bool& pending, int peer, std::string_view what) {
  Status status = ctx_.start(request);
  pending = status.isOk();
  if (!status.isOk()) note(std::move(status), peer, what);
}

Result<bool> DirectWriteAlltoall::collect(Request& request, bool& pending, int peer, std::string_view what) {
  Status status;
  const bool wasPending = pending;
  IBDT_ASSIGN_OR_RETURN(bool done, collectRequest(ctx_, request, pending, status));
  if (wasPending && done && !status.isOk()) note(std::move(status), peer, what);
  return wasPending && done;
}

Status DirectWriteAlltoall::start() {
  outcome_ = Status();
  active_ = true;
  const int p = comm_.size(), rank = comm_.rank();
  // Receives first: the ready and the notification of one peer share a tag
  // and arrive in that order.
  for (int offset = 1; offset < p; ++offset) {
    const int peer = (rank + offset) % p;
    Pair& pair = peers_[static_cast<size_t>(peer)];
    pair.putStarted = false;
    pair.readyOk = false;
    startRequest(pair.ready, pair.readyPending, peer, "ready from");
    tracer_.record(0, false, peer, blocks_[static_cast<size_t>(peer)].recvBytes);
    startRequest(pair.exposure, pair.exposurePending, peer, "write from");
  }
  for (int offset = 1; offset < p; ++offset) {
    const int peer = (rank + p - offset) % p;
    Pair& pair = peers_[static_cast<size_t>(peer)];
    startRequest(pair.readySend, pair.readySendPending, peer, "ready to");
  }
  const DirectBlock& own = blocks_[static_cast<size_t>(rank)];
  if (own.sendBytes > 0) copyBytes(own.recv, own.send, static_cast<size_t>(own.sendBytes));
  return Status::ok();
}

Result<PollResult> DirectWriteAlltoall::poll() {
  PollResult result;
  if (!active_) return PollResult{true, false};
  IBDT_RETURN_IF_ERROR(ctx_.progress());
  bool done = true;
  for (int peer = 0; peer < comm_.size(); ++peer) {
    Pair& pair = peers_[static_cast<size_t>(peer)];
    if (!pending(pair)) continue;
    bool readyNow = false;
    if (pair.readyPending) {
      Status status;
      IBDT_ASSIGN_OR_RETURN(readyNow, collectRequest(ctx_, pair.ready, pair.readyPending, status));
      if (readyNow && status.isOk()) status = retarget(pair);
      pair.readyOk = readyNow && status.isOk();
      if (readyNow && !status.isOk()) note(std::move(status), peer, "ready from");
    }
    if (!pair.putStarted && !pair.readyPending) {
      // A failed ready (dead peer) leaves the put out: nothing may be written.
      if (pair.readyOk) {
        tracer_.record(0, true, peer, blocks_[static_cast<size_t>(peer)].sendBytes);
        startRequest(pair.put, pair.putPending, peer, "write to");
      }
      pair.putStarted = true;
      result.progressed = true;
    }
    IBDT_ASSIGN_OR_RETURN(bool a, collect(pair.put, pair.putPending, peer, "write to"));
    IBDT_ASSIGN_OR_RETURN(bool b, collect(pair.exposure, pair.exposurePending, peer, "write from"));
    IBDT_ASSIGN_OR_RETURN(bool c, collect(pair.readySend, pair.readySendPending, peer, "ready to"));
    result.progressed = result.progressed || readyNow || a || b || c;
    if (pending(pair)) done = false;
  }
  if (done) active_ = false;
  result.done = done;
  return result;
}

Status DirectWriteAlltoall::block(Deadline deadline) {
  for (int peer = 0; peer < comm_.size(); ++peer) {
    Pair& pair = peers_[static_cast<size_t>(peer)];
    Request* request = pair.readyPending       ? &pair.ready
                       : pair.putPending       ? &pair.put
                       : pair.exposurePending  ? &pair.exposure
                       : pair.readySendPending ? &pair.readySend
                                               : nullptr;
    if (request == nullptr) continue;
    Status status;  // collected by the next poll()
    IBDT_ASSIGN_OR_RETURN(bool done, waitRequest(ctx_, *request, deadline, status));
    if (!done) {
      return makeError(Code::kTimeout, "alltoall (direct-write) rank ", comm_.rank(), ": the exchange with rank ", peer,
                       " did not complete in time");
    }
    return Status::ok();
  }
  return Status::ok();
}

Status DirectWriteAlltoall::retarget(Pair& pair) {
  if (pair.peerKey == pair.targetKey) return Status::ok();
  IBDT_RETURN_IF_ERROR(ctx_.retargetPut(pair.put, pair.peerKey));
  pair.targetKey = pair.peerKey;
  return Status::ok();
}

Status DirectWriteAlltoall::rebind(const void* sendbuf, void* recvbuf) {
  const auto* send = static_cast<const std::byte*>(sendbuf);
  auto* recv = static_cast<std::byte*>(recvbuf);
  if (send == sendbuf_ && recv == recvbuf_) return Status::ok();
  for (int peer = 0; peer < comm_.size(); ++peer) {
    DirectBlock& block = blocks_[static_cast<size_t>(peer)];
    Pair& pair = peers_[static_cast<size_t>(peer)];
    block.send = send + (block.send - sendbuf_);
    block.recv = recv + (block.recv - recvbuf_);
    if (peer == comm_.rank()) continue;  // the own block is a local copy
    IBDT_RETURN_IF_ERROR(ctx_.rebindOneSided(pair.put, block.send).status());
    IBDT_ASSIGN_OR_RETURN(pair.ownKey, ctx_.rebindOneSided(pair.exposure, block.recv));
  }
  sendbuf_ = send;
  recvbuf_ = recv;
  return Status::ok();
}

void DirectWriteAlltoall::abandon() {
  for (Pair& pair : peers_) {
    if (pair.readyPending) (void)ctx_.cancel(pair.ready);
    if (pair.exposurePending) (void)ctx_.cancel(pair.exposure);
  }
  active_ = false;
}

}  // namespace

bool denseBlocks(const datatype::Datatype& type) {
  return type.contiguous() && type.lb() == 0 && type.trueLb() == 0 && type.extent() == type.size();
}

Result<int64_t> agreeOnDirectWrite(Communicator& comm, bool argsOk, bool inPlace, const datatype::Datatype& sendtype,
                                   const datatype::Datatype& recvtype) {
  int64_t vote = !argsOk || inPlace ? 0 : denseBlocks(sendtype) && denseBlocks(recvtype) ? 2 : 1;
  IBDT_RETURN_IF_ERROR(allreduce(comm, &vote, &vote, 1, ReduceOp::kMin));
  return vote;
}

Result<std::unique_ptr<PlanImpl>> makeDirectWrite(Communicator& comm, const void* sendbuf, void* recvbuf,
                                                  std::vector<DirectBlock> blocks, bool agreeLengths) {
  auto plan = std::make_unique<DirectWriteAlltoall>(comm, sendbuf, recvbuf, std::move(blocks));
  IBDT_RETURN_IF_ERROR(plan->prepare(agreeLengths));
  return std::unique_ptr<PlanImpl>(std::move(plan));
}

Result<std::unique_ptr<PlanImpl>> makeDirectWriteAlltoall(Communicator& comm, const Result<AlltoallArgs>& checked,
                                                          int64_t throttle, const AlltoallBuild& instead) {
  IBDT_ASSIGN_OR_RETURN(int64_t vote, agreeOnDirectWrite(comm, checked.isOk(), checked.isOk() && checked->inPlace,
                                                         checked.isOk() ? checked->sendtype : datatype::Datatype(),
                                                         checked.isOk() ? checked->recvtype : datatype::Datatype()));
  if (!checked.isOk()) return checked.status();
  if (checked->inPlace) {
    return makeError(Code::kInvalidArgument,
                     "alltoall (direct-write): kInPlace is not supported (a peer's write "
                     "would land on a block not yet sent); use pairwise or a Bruck form");
  }
  if (vote == 0) {
    return makeError(Code::kInvalidArgument, "alltoall (direct-write): the arguments failed on another rank");
  }
  if (vote == 1) {
    IBDT_LOG(kDebug, "alltoall direct-write: a rank's types are not dense blocks; every rank runs ",
             instead ? "the next choice" : "pairwise");
    return instead ? instead(*checked) : makePairwiseAlltoall(comm, *checked, throttle);
  }
  std::vector<DirectBlock> blocks;
  for (int peer = 0; peer < comm.size(); ++peer) {
    blocks.push_back({checked->sendBlock(peer), checked->bytes, checked->recvBlock(peer), checked->bytes});
  }
  return makeDirectWrite(comm, checked->sendbuf, checked->recvbuf, std::move(blocks), false);
}

}  // namespace ibdt::collectives
