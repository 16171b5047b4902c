// The throttled cyclic round driver (see pairwise_rounds.h).
//
// Blocks of zero bytes are still exchanged: the empty message carries its
// signature, so a peer that expects bytes fails rather than waits forever.
#include "collectives/pairwise_rounds.h"

#include <algorithm>

namespace ibdt::collectives {

using messaging::Request;

PairwiseRounds::PairwiseRounds(Communicator& comm, PairwiseLayout layout, int64_t throttle, std::string name,
                               std::string_view algorithm)
    : comm_(comm), ctx_(comm.context()), contextId_(comm.contextId()), tag_(comm.takePlanTag()), rank_(comm.rank()),
      layout_(std::move(layout)), name_(std::move(name)), algorithm_(algorithm) {
  const int size = comm.size();
  for (int r = layout_.inPlace ? 0 : 1; r < size; ++r) {
    int to = (rank_ + r) % size, from = (rank_ - r + size) % size;
    if (layout_.inPlace) to = from = (r - rank_ + size) % size;
    if (to != rank_) rounds_.push_back({r, to, from, {}, {}});
  }
  const size_t inFlight =
      throttle == 0 ? rounds_.size() : std::min<size_t>(rounds_.size(), static_cast<size_t>(throttle));
  slots_.resize(inFlight);
  if (layout_.inPlace) staging_.resize(inFlight * static_cast<size_t>(layout_.stagedBytes));
}

Result<std::unique_ptr<PairwiseRounds>> PairwiseRounds::create(Communicator& comm, PairwiseLayout layout,
                                                               int64_t throttle, std::string name,
                                                               std::string_view algorithm) {
  const PeerBlock own = layout.peers[static_cast<size_t>(comm.rank())];
  std::optional<datatype::TypedCopy> copy;
  if (layout.inPlace && layout.stagedBytes > 0) {
    IBDT_ASSIGN_OR_RETURN(datatype::TypedCopy typed, datatype::TypedCopy::create(layout.recvtype, own.recvCount,
                                                                                 layout.staged, own.recvCount));
    copy.emplace(std::move(typed));
  } else if (!layout.inPlace &&
             (own.sendCount * layout.sendtype.size() > 0 || own.recvCount * layout.recvtype.size() > 0)) {
    IBDT_ASSIGN_OR_RETURN(datatype::TypedCopy typed, datatype::TypedCopy::create(layout.sendtype, own.sendCount,
                                                                                 layout.recvtype, own.recvCount));
    copy.emplace(std::move(typed));
  }
  std::unique_ptr<PairwiseRounds> plan(new PairwiseRounds(comm, std::move(layout), throttle, std::move(name), algorithm));
  plan->own_ = std::move(copy);
  IBDT_RETURN_IF_ERROR(plan->prepare());
  return plan;
}

// Every round's send and receive as persistent requests: a run starts them
// and allocates no operation.
Status PairwiseRounds::prepare() {
  for (Round& round : rounds_) {
    const PeerBlock& in = layout_.peers[static_cast<size_t>(round.from)];
    const PeerBlock& out = layout_.peers[static_cast<size_t>(round.to)];
    round.recvBytes = in.recvCount * layout_.recvtype.size();
    round.sendBytes = layout_.inPlace ? layout_.stagedBytes : out.sendCount * layout_.sendtype.size();
    IBDT_ASSIGN_OR_RETURN(round.recv, ctx_.recvInit(in.recv, in.recvCount, layout_.recvtype,
                                                    comm_.contextRank(round.from), tag_, contextId_));
    if (layout_.inPlace) {  // round n runs in slot n % slots (posted and collected in ring order)
      IBDT_ASSIGN_OR_RETURN(round.send, ctx_.sendInit(stagingOf(round), out.recvCount, layout_.staged,
                                                      comm_.contextRank(round.to), tag_, contextId_));
      continue;
    }
    IBDT_ASSIGN_OR_RETURN(round.send, ctx_.sendInit(out.send, out.sendCount, layout_.sendtype,
                                                    comm_.contextRank(round.to), tag_, contextId_));
  }
  return Status::ok();
}

void PairwiseRounds::skipPeer(int peer, bool send, bool receive) {
  for (Round& round : rounds_) {
    if (send && round.to == peer) round.skipSend = true;
    if (receive && round.from == peer) round.skipRecv = true;
  }
}

std::vector<int> PairwiseRounds::cancelUnmatchedReceives() {
  std::vector<int> unmatched;
  for (Slot& slot : slots_) {
    if (slot.round == nullptr || !slot.recvPending) continue;
    bool pending = false;
    if (!complete(slot, /*receive=*/true, pending).isOk() || !pending) continue;  // it arrived meanwhile
    if (!ctx_.cancel(slot.round->recv).isOk()) continue;  // matched, still moving: completes as usual
    (void)ctx_.wait(slot.round->recv);                    // kCancelled: not this run's error
    slot.recvPending = false;
    unmatched.push_back(slot.round->from);
  }
  return unmatched;
}

Status PairwiseRounds::start() {
  outcome_ = Status::ok();
  nextRound_ = 0;
  completed_ = 0;
  head_ = 0;
  active_ = true;
  for (Slot& slot : slots_) post(slot);
  if (!layout_.inPlace && own_.has_value() && own_->size() > 0) {
    const PeerBlock& own = layout_.peers[static_cast<size_t>(rank_)];
    note(own_->run(own.send, own.recv, 0, own_->size()), 0, "copy of the own block");
  }
  if (rounds_.empty()) active_ = false;
  return Status::ok();
}

// Collects rounds in the order they were posted: the slots form a ring
// whose head holds the oldest round. Testing stops at the first request
// still pending, so one poll drives the transport's progress once, not once
// per request in flight; later rounds that finished meanwhile are collected
// when the head moves on.
Result<PollResult> PairwiseRounds::poll() {
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
Status PairwiseRounds::block(Deadline deadline) {
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
    return makeError(Code::kTimeout, name_, " rank ", rank_, ": round ", round.round, " did not complete in time (",
                     receive ? "receive from" : "send to", " rank ", peer, ")");
  }
  (receive ? oldest.recvPending : oldest.sendPending) = false;
  if (!status.isOk()) note(std::move(status), round.round, strCat(receive ? "receive from" : "send to", " rank ", peer));
  return Status::ok();
}

void PairwiseRounds::abandon() {
  for (Slot& slot : slots_) {
    if (slot.round != nullptr && slot.recvPending) (void)ctx_.cancel(slot.round->recv);
    slot = Slot{};
  }
  active_ = false;
}

// Starts the next round in `slot` (or leaves it idle when none is left).
void PairwiseRounds::post(Slot& slot) {
  slot = Slot{};
  if (nextRound_ == rounds_.size()) return;
  Round& round = rounds_[nextRound_++];
  slot.round = &round;
  if (layout_.inPlace && own_.has_value() && !round.skipSend) {  // the block leaves from staging before it is replaced
    note(own_->run(layout_.peers[static_cast<size_t>(round.to)].recv, stagingOf(round), 0, layout_.stagedBytes),
         round.round, "staging copy");
  }
  const int index = static_cast<int>(&round - rounds_.data());
  if (!round.skipRecv) {
    tracer_.record(index, false, round.from, round.recvBytes);
    Status recv = ctx_.start(round.recv);
    if (recv.isOk()) slot.recvPending = true;
    else note(std::move(recv), round.round, strCat("receive from rank ", round.from));
  }
  if (!round.skipSend) {
    tracer_.record(index, true, round.to, round.sendBytes);
    Status send = ctx_.start(round.send);
    if (send.isOk()) slot.sendPending = true;
    else note(std::move(send), round.round, strCat("send to rank ", round.to));
  }
}

// Collects the slot's receive or send when it completed (its error goes into
// the outcome); sets `pending` when it has not. Only a failure of progress
// is returned.
Status PairwiseRounds::complete(Slot& slot, bool receive, bool& pending) {
  if (!(receive ? slot.recvPending : slot.sendPending)) return Status::ok();
  Round& round = *slot.round;
  Status status;
  IBDT_ASSIGN_OR_RETURN(bool done, collectRequest(ctx_, receive ? round.recv : round.send,
                                                  receive ? slot.recvPending : slot.sendPending, status));
  if (!done) {
    pending = true;
    return Status::ok();
  }
  if (!status.isOk()) {
    note(std::move(status), round.round,
         strCat(receive ? "receive from" : "send to", " rank ", receive ? round.from : round.to));
  }
  return Status::ok();
}

std::byte* PairwiseRounds::stagingOf(const Round& round) {
  const size_t index = static_cast<size_t>(&round - rounds_.data());
  return staging_.data() + (index % slots_.size()) * static_cast<size_t>(layout_.stagedBytes);
}

// Keeps the first error of the run, naming the round and peer.
void PairwiseRounds::note(Status status, int round, std::string_view what) {
  if (status.isOk() || !outcome_.isOk()) return;
  outcome_ = makeError(status.code(), name_, " rank ", rank_, ", round ", round, ", ", what, ": ", status.message());
}

}  // namespace ibdt::collectives
