// Direct (pairwise) alltoall with a cyclic schedule and a throttle.
//
// Round r (1 <= r < p): send this rank's block for rank + r, receive the
// block of rank - r (mod p). Every pair exchanges in exactly one round, and
// in each round every rank sends to one peer and receives from another, so
// no rank is the target of more than one message per round (no hot spot).
// At most `throttle` rounds are in flight: a new one is posted when one
// completes (both its receive and its send), which bounds the messages
// queued at any peer. Own block (round 0): a typed copy, done while the
// first rounds travel.
//
// Blocks of zero bytes are still exchanged: the empty message carries its
// signature, so a peer that expects bytes fails rather than waits forever.
//
// In place (kInPlace), a block received must not overwrite one still to be
// sent, so rounds pair ranks instead: in round r (0 <= r < p) rank i
// exchanges block (r - i) mod p both ways with that rank (an involution; a
// rank paired with itself idles), like MPI_Sendrecv_replace. The block to
// send is packed into a staging slot first, one slot per round in flight:
// extra memory min(throttle, p - 1) blocks.
#include <algorithm>
#include <vector>

#include "collectives/alltoall_pairwise.h"
#include "collectives/alltoall_rounds.h"
#include "ibdt/messaging.h"

namespace ibdt::collectives {
namespace {

using messaging::Request;

class PairwiseAlltoall final : public PlanImpl {
 public:
  // `own`: the own block's copy, or in place the copy into a staging slot
  // of `packed` (a block in the receive type's signature).
  PairwiseAlltoall(Communicator& comm, const AlltoallArgs& args, int64_t throttle, datatype::TypedCopy own,
                   datatype::Datatype packed)
      : comm_(comm), ctx_(comm.context()), contextId_(comm.contextId()), tag_(comm.takePlanTag()), rank_(comm.rank()),
        args_(args), own_(std::move(own)), packed_(std::move(packed)) {
    const int size = comm.size();
    for (int r = args.inPlace ? 0 : 1; r < size; ++r) {
      int to = (rank_ + r) % size, from = (rank_ - r + size) % size;
      if (args.inPlace) to = from = (r - rank_ + size) % size;
      if (to != rank_) rounds_.push_back({r, to, from, {}, {}});
    }
    const size_t inFlight = throttle == 0 ? rounds_.size() : std::min<size_t>(rounds_.size(), static_cast<size_t>(throttle));
    slots_.resize(inFlight);
    if (args.inPlace) staging_.resize(inFlight * static_cast<size_t>(args.bytes));
  }


  // Every round's send and receive as persistent requests: a run starts
  // them and allocates no operation.
  Status prepare() {
    for (Round& round : rounds_) {
      IBDT_ASSIGN_OR_RETURN(round.recv, ctx_.recvInit(args_.recvBlock(round.from), args_.recvcount, args_.recvtype,
                                                      comm_.contextRank(round.from), tag_, contextId_));
      if (args_.inPlace) {  // round n runs in slot n % slots (posted and collected in ring order)
        IBDT_ASSIGN_OR_RETURN(round.send, ctx_.sendInit(stagingOf(round), args_.recvcount, packed_,
                                                        comm_.contextRank(round.to), tag_, contextId_));
        continue;
      }
      IBDT_ASSIGN_OR_RETURN(round.send, ctx_.sendInit(args_.sendBlock(round.to), args_.sendcount, args_.sendtype,
                                                      comm_.contextRank(round.to), tag_, contextId_));
    }
    return Status::ok();
  }

  Status start() override {
    outcome_ = Status::ok();
    nextRound_ = 0;
    completed_ = 0;
    head_ = 0;
    active_ = true;
    for (Slot& slot : slots_) post(slot);
    if (args_.bytes > 0 && !args_.inPlace) {
      note(own_.run(args_.sendBlock(rank_), args_.recvBlock(rank_), 0, args_.bytes), 0, "copy of the own block");
    }
    if (rounds_.empty()) active_ = false;
    return Status::ok();
  }

  // Collects rounds in the order they were posted: the slots form a ring
  // whose head holds the oldest round. Testing stops at the first request
  // still pending, so one poll drives the transport's progress once, not
  // once per request in flight; later rounds that finished meanwhile are
  // collected when the head moves on.
  Result<PollResult> poll() override {
    PollResult result;
    while (completed_ < rounds_.size()) {
      Slot& slot = slots_[head_];
      bool pending = false;
      IBDT_RETURN_IF_ERROR(complete(slot, /*receive=*/true, pending));
      if (!pending) IBDT_RETURN_IF_ERROR(complete(slot, /*receive=*/false, pending));
      if (pending) break;
      ++completed_;
      result.progressed = true;
      post(slot);  // the slot now holds the newest round
      head_ = (head_ + 1) % slots_.size();
    }
    result.done = completed_ == rounds_.size();
    if (result.done) active_ = false;
    return result;
  }

  // Waits on the oldest round's pending request, the one the schedule needs
  // next; messaging's wait progresses every other round meanwhile.
  Status block(Deadline deadline) override {
    if (completed_ == rounds_.size()) return Status::ok();
    Slot& oldest = slots_[head_];
    if (oldest.round == nullptr || (!oldest.recvPending && !oldest.sendPending)) return Status::ok();
    const bool receive = oldest.recvPending;
    Round& round = *oldest.round;
    Request& request = receive ? round.recv : round.send;
    const int peer = receive ? round.from : round.to;
    Status status;
    IBDT_ASSIGN_OR_RETURN(bool done, waitRequest(ctx_, request, deadline, status));
    if (!done) {  // the wait gave up: the run stays active
      return makeError(Code::kTimeout, "alltoall (pairwise) rank ", rank_, ": round ", round.round,
                       " did not complete in time (", receive ? "receive from" : "send to", " rank ", peer, ")");
    }
    (receive ? oldest.recvPending : oldest.sendPending) = false;
    if (!status.isOk()) note(std::move(status), round.round, strCat(receive ? "receive from" : "send to", " rank ", peer));
    return Status::ok();
  }

  Status outcome() const override { return outcome_; }
  bool active() const override { return active_; }

  void abandon() override {
    for (Slot& slot : slots_) {
      if (slot.round != nullptr && slot.recvPending) (void)ctx_.cancel(slot.round->recv);
      slot = Slot{};
    }
    active_ = false;
  }

  std::string_view algorithm() const override { return "pairwise"; }

 private:
  struct Round {
    int round;
    int to, from;
    Request send, recv;  // persistent
  };
  struct Slot {
    Round* round = nullptr;  // null: idle
    bool sendPending = false, recvPending = false;
  };

  // Starts the next round in `slot` (or leaves it idle when none is left).
  void post(Slot& slot) {
    slot = Slot{};
    if (nextRound_ == rounds_.size()) return;
    Round& round = rounds_[nextRound_++];
    slot.round = &round;
    if (args_.inPlace && args_.bytes > 0) {  // the block leaves from staging before the receive replaces it
      note(own_.run(args_.recvBlock(round.to), stagingOf(round), 0, args_.bytes), round.round, "staging copy");
    }
    Status recv = ctx_.start(round.recv);
    if (recv.isOk()) slot.recvPending = true;
    else note(std::move(recv), round.round, "receive from rank " + std::to_string(round.from));
    Status send = ctx_.start(round.send);
    if (send.isOk()) slot.sendPending = true;
    else note(std::move(send), round.round, "send to rank " + std::to_string(round.to));
  }

  // Collects the slot's receive or send when it completed (its error goes
  // into the outcome); sets `pending` when it has not. Only a failure of
  // progress is returned.
  Status complete(Slot& slot, bool receive, bool& pending) {
    if (!(receive ? slot.recvPending : slot.sendPending)) return Status::ok();
    Round& round = *slot.round;
    Status status;
    IBDT_ASSIGN_OR_RETURN(bool done, collectRequest(ctx_, receive ? round.recv : round.send,
                                                    receive ? slot.recvPending : slot.sendPending, status));
    if (!done) {
      pending = true;
      return Status::ok();
    }
    if (!status.isOk()) note(std::move(status), round.round, strCat(receive ? "receive from" : "send to", " rank ", receive ? round.from : round.to));
    return Status::ok();
  }

  std::byte* stagingOf(const Round& round) {
    const size_t index = static_cast<size_t>(&round - rounds_.data());
    return staging_.data() + (index % slots_.size()) * static_cast<size_t>(args_.bytes);
  }

  // Keeps the first error of the run, naming the round and peer.
  void note(Status status, int round, const std::string& what) {
    if (status.isOk() || !outcome_.isOk()) return;
    outcome_ = makeError(status.code(), "alltoall (pairwise) rank ", rank_, ", round ", round, ", ", what, ": ",
                         status.message());
  }

  const Communicator& comm_;
  messaging::Context& ctx_;
  uint32_t contextId_;
  int32_t tag_;
  int rank_;
  AlltoallArgs args_;
  datatype::TypedCopy own_;  // round 0 (in place: the staging copy), prepared once
  datatype::Datatype packed_;           // in place: the staged block's type
  std::vector<std::byte> staging_;      // in place: one block per slot
  std::vector<Round> rounds_;
  std::vector<Slot> slots_;
  size_t nextRound_ = 0;
  size_t completed_ = 0;
  size_t head_ = 0;  // slot of the oldest round in flight
  bool active_ = false;
  Status outcome_;
};

}  // namespace

Result<std::unique_ptr<PlanImpl>> makePairwiseAlltoall(Communicator& comm, const AlltoallArgs& args,
                                                       int64_t throttle) {
  datatype::Datatype packed = args.recvtype;
  if (args.inPlace && args.bytes > 0) {
    IBDT_ASSIGN_OR_RETURN(packed, packedType(args.recvtype));
  }
  const datatype::Datatype& ownTarget = args.inPlace ? packed : args.recvtype;
  IBDT_ASSIGN_OR_RETURN(datatype::TypedCopy own, datatype::TypedCopy::create(args.sendtype, args.sendcount,
                                                                             ownTarget, args.recvcount));
  auto plan = std::make_unique<PairwiseAlltoall>(comm, args, throttle, std::move(own), packed);
  IBDT_RETURN_IF_ERROR(plan->prepare());
  return std::unique_ptr<PlanImpl>(std::move(plan));
}

}  // namespace ibdt::collectives
