// In-place alltoallv with limited memory (Hofmann/Rünger, Algorithm 1;
// docs/alltoallv.md). One buffer: the outgoing blocks are replaced by the
// incoming ones, with auxiliary memory of a fixed size (inplace_index_sets.h
// keeps the index sets and says why it terminates).
//
// A run is a sequence of phases. Each phase (1) computes what this rank can
// take from every peer, (2) exchanges control messages with every peer it
// still has items to send to or receive from: {items in place, items into
// the auxiliary buffer, gave up}, both ways, so the pair stays in step,
// (3) moves each pair's items as soon as both of its control messages
// completed (up to two messages per direction: the in-place part and the
// auxiliary part, matched in order) and, once everything completed, (4)
// updates the index sets. Own items are copied locally when the phase's
// data starts.
//
// Overlapped phases (docs/alltoallv.md, "In-place: overlapped phases"):
// phase k + 1's control messages leave as soon as all of phase k's did,
// while phase k's data is still in flight; its requests count what phase k
// takes as taken (InPlaceIndexSets::requests with `pending`), so they stay
// valid whatever phase k's update does. Phase k + 1's data is posted only
// after phase k's update, and phase k + 2's control only after that: at
// most two phases in flight, and each pair posts its messages in the same
// order on both ranks (control k, data k, control k + 1, data k + 1).
// Termination: a phase whose requests were all empty leaves nothing
// pending, so the next one's requests are Algorithm 1's own, which move an
// item (inplace_index_sets.h): every two phases move at least one.
//
// The copy path (inplace_copy.h): blocks that fit the auxiliary memory are
// copied out before phase 0 and leave from the copy, so receive blocks that
// then hold no waiting item take everything in place. A pair whose phase-0
// control messages both ask for everything in place is exchanged whole in
// phase 0 (each side one message, straight into the user's buffer) and
// takes part in no later phase: the verdict is derived from both messages,
// which every pair exchanges anyway, so no vote is needed.
//
// Pairs whose blocks lie where they are to arrive on both ranks (MPI's
// in-place rule) leave the phases after phase 0's control messages and swap
// in chunks on their own (inplace_pair_stream.h); a rank's own block in
// place is not moved at all.
//
// Blocks of at most 256 B ride inside phase 0's control messages
// (inplace_control_messages.h): a pair of such blocks moves in one message
// each way, and the receiver places them in the update after phase 0.
//
// The pair check (pair_signature_check.h: both signatures and counts of
// each pair) rides on phase 0's control messages, which every run
// exchanges with every peer, also those it has nothing to move with: so
// every run checks every pair at the cost of a few words, both ranks of a
// pair reach the same verdict, and a pair changed on one rank only fails on
// both, never hangs (the other rank cannot skip the exchange). That lets
// ranks build or reuse plans independently on one pinned tag (the MPI
// bridge's blocking in-place MPI_Alltoallv): control and data then share
// the tag, which works because each pair posts its messages in the same
// order on both ranks (control k, its data, control k + 1), and a run ends
// only when every message a peer sent it in that run was received.
//
// Failure: a rank whose control or data message fails, whose pair check
// fails, or whose peer said it gave up, announces "gave up" in its next
// control exchange and stops after it. Its peers do the same in turn, so
// every rank still waiting on another ends with an error rather than a
// hang, and no message is left unreceived on the plan's tags.
#include <algorithm>
#include <array>

#include "collectives/alltoallv_algorithms.h"
#include "collectives/inplace_control_messages.h"
#include "collectives/inplace_index_sets.h"
#include "collectives/inplace_pair_stream.h"
#include "collectives/inplace_phase_run.h"
#include "collectives/pair_signature_check.h"

namespace ibdt::collectives {
namespace {

using messaging::Request;

// in place, auxiliary, gave up, stream slice (phase 0: items, 0 = this pair
// cannot stream); then the pair check's words (phase 0)
constexpr size_t kStreamAt = 3;
constexpr size_t kCheckAt = 4;
constexpr size_t kControlWords = kCheckAt + PairSignatureCheck::kWords;

class InPlaceAlltoallv final : public PlanImpl {
 public:
  InPlaceAlltoallv(Communicator& comm, AlltoallvArgs args, InPlaceIndexSets sets, InPlaceControlMessages messages)
      : comm_(comm), ctx_(comm.context()), rank_(comm.rank()), size_(comm.size()), args_(std::move(args)),
        sets_(std::move(sets)), messages_(std::move(messages)), streams_(static_cast<size_t>(comm.size())) {
    const size_t size = static_cast<size_t>(size_);
    gone_.assign(size, 0);
    truncated_.assign(size, 0);
    for (size_t peer = 0; peer < size; ++peer) {  // the check words never change
      PairSignatureCheck::pairWords(args_, peer, messages_.out(static_cast<int>(peer)) + kCheckAt);
    }
    for (InPlacePhaseRun& run : phases_) {  // per peer: 2 control, up to 2 data each way (no reallocation mid-phase)
      run.ops.reserve(6 * size);
      run.begin(0, size, false);
    }
  }

  Status prepare() {
    controlTag_ = comm_.takePlanTag();  // both the same pinned tag when one is pinned (see the top)
    dataTag_ = comm_.takePlanTag();
    notePeak();
    return Status::ok();
  }

  Status start() override {
    outcome_ = Status::ok();
    active_ = true;
    nextPhase_ = 0;
    inFlight_ = 0;
    phasesOver_ = announced_ = giveUp_ = false;
    messages_.pack(args_.recvbuf, args_.sdispls, sets_.elements());  // before reset() moves anything
    sets_.reset();
    gone_.assign(gone_.size(), 0);
    truncated_.assign(truncated_.size(), 0);
    streams_.clear();
    pushPhase(nullptr);  // phase 0 checks every pair
    return Status::ok();
  }

  Result<PollResult> poll() override {
    PollResult result;
    while (!phasesOver_) {
      streams_.progress();
      IBDT_RETURN_IF_ERROR(collect(result.progressed));
      if (!advance()) return result;
      result.progressed = true;
    }
    if (!streams_.progress()) return result;
    note(streams_.outcome());
    active_ = false;
    notePeak();
    result.done = true;
    return result;
  }

  // Waits for the first pending operation of the older phase, else of the
  // newer one, else for a stream's.
  Status block(Deadline deadline) override {
    for (int n = 0; n < inFlight_; ++n) {
      InPlacePhaseRun& run = at(n);
      for (size_t i = 0; i < run.ops.size(); ++i) {
        InPlacePhaseOp& op = run.ops[i];
        if (!op.request.valid()) continue;
        Status status = ctx_.wait(op.request, nullptr, deadline);
        if (op.request.valid()) {  // still pending: the wait gave up, the run stays active
          return makeError(Code::kTimeout, "alltoallv (in place) rank ", rank_, ": phase ", run.number, " ",
                           op.what, " rank ", op.peer, " did not complete in time");
        }
        finishOp(run, i, std::move(status));
        return Status::ok();
      }
    }
    return phasesOver_ ? streams_.block(deadline) : Status::ok();
  }

  Status outcome() const override { return outcome_; }
  bool active() const override { return active_; }
  void abandon() override {
    for (InPlacePhaseRun& run : phases_) {
      for (InPlacePhaseOp& op : run.ops) {
        if (op.request.valid() && op.receive) (void)ctx_.cancel(op.request);
      }
      run.ops.clear();
    }
    inFlight_ = 0;
    streams_.cancel();
    phasesOver_ = true;
    active_ = false;
  }
  std::string_view algorithm() const override { return "in-place"; }
  int64_t peakExtraBytes() const override { return peak_; }

 private:
  // n = 0: the older phase in flight (its data may be posted), 1: the newer.
  InPlacePhaseRun& at(int n) { return phases_[static_cast<size_t>((frontAt_ + n) % 2)]; }
  InPlacePhaseRun& front() { return at(0); }
  // What the older phase gives / takes while it is not yet update()d and
  // `run` is the newer one; nothing otherwise.
  PhaseCounts pendingGive(const InPlacePhaseRun& run, int peer) {
    return run.dataStage ? PhaseCounts{} : front().give[static_cast<size_t>(peer)];
  }
  int64_t leftToSend(const InPlacePhaseRun* pending, int peer) const {
    return sets_.remainingSend(peer) - (pending ? pending->give[static_cast<size_t>(peer)].total() : 0);
  }
  int64_t leftToReceive(const InPlacePhaseRun* pending, int peer) const {
    return sets_.remainingRecv(peer) - (pending ? pending->take[static_cast<size_t>(peer)].total() : 0);
  }

  // Phase 0 exchanges with every peer (the pair check), later phases with
  // the peers this rank still has items to send to or receive from once
  // the phase in flight (`pending`) is done.
  bool pairActive(int phase, const InPlacePhaseRun* pending, int peer) const {
    return peer != rank_ && !gone_[static_cast<size_t>(peer)] &&
           (phase == 0 || leftToSend(pending, peer) > 0 || leftToReceive(pending, peer) > 0);
  }
  bool nothingLeft(const InPlacePhaseRun* pending) const {
    for (int peer = 0; peer < size_; ++peer) {
      if (leftToSend(pending, peer) > 0 || leftToReceive(pending, peer) > 0) return false;
    }
    return true;
  }

  // Phase 0: the pair's words against the peer's; a mismatch takes the pair
  // out on both of its ranks (the verdict is symmetric) and this rank gives up.
  bool pairMatches(int peer) {
    Status pair = PairSignatureCheck::comparePair(rank_, peer, true, messages_.out(peer) + kCheckAt,
                                                  messages_.in(peer) + kCheckAt, false);
    if (pair.isOk() && truncated_[static_cast<size_t>(peer)]) {  // cannot be: its length follows from the counts
      pair = makeError(Code::kInvalidArgument, "alltoallv (in place) rank ", rank_, ": rank ", peer,
                       "'s phase-0 control message is longer than its counts imply");
    }
    if (pair.isOk()) return true;
    gone_[static_cast<size_t>(peer)] = 1;
    note(pair);
    giveUp_ = true;
    return false;
  }

  // The phases' state machine, one step; false when nothing can change
  // until a message completes.
  bool advance() {
    if (inFlight_ > 0 && front().retirable()) {
      retire();
      return true;
    }
    if (inFlight_ == 1 && front().controlsPending == 0 && !front().successorDecided) {
      front().successorDecided = true;
      if (!front().announcing) pushPhase(&front());
      return true;
    }
    if (inFlight_ == 0) {
      if (announced_ || (!giveUp_ && sets_.done())) {
        finish();
      } else {
        pushPhase(nullptr);
      }
      return true;
    }
    return false;
  }

  // Step (1) and (2) of the next phase: what to take, told to every active
  // peer. `pending`: the phase whose data is in flight (its update not yet
  // run), or null.
  void pushPhase(const InPlacePhaseRun* pending) {
    const bool announcing = giveUp_;  // what every peer of this phase is told, whatever fails while posting
    if (pending != nullptr && !announcing && nothingLeft(pending)) return;
    const size_t size = static_cast<size_t>(size_);
    InPlacePhaseRun& run = at(inFlight_);
    const std::vector<PhaseCounts> none;
    run.begin(nextPhase_++, size, announcing);
    ++inFlight_;
    announced_ = announcing;
    if (!announcing) sets_.requests(run.take, run.number % size_, run.number == 0, pending ? pending->take : none);
    const datatype::Datatype word = datatype::Datatype::of<int64_t>();
    for (int peer = 0; peer < size_; ++peer) {
      if (!pairActive(run.number, pending, peer)) continue;
      int64_t* out = messages_.out(peer);
      // Phase 0 carries the inline blocks (inplace_control_messages.h).
      const bool first = run.number == 0;
      const int64_t outWords = first ? messages_.outWords(peer) : static_cast<int64_t>(kControlWords);
      const int64_t inWords = first ? messages_.inWords(peer) : static_cast<int64_t>(kControlWords);
      out[0] = run.take[static_cast<size_t>(peer)].inPlace;
      out[1] = run.take[static_cast<size_t>(peer)].aux;
      out[2] = announcing ? 1 : 0;
      out[kStreamAt] = first ? sets_.streamItems(peer) : 0;
      int& left = run.controlLeft[static_cast<size_t>(peer)];
      left += post(run, ctx_.irecv(messages_.in(peer), inWords, word, comm_.contextRank(peer), controlTag_,
                                   comm_.contextId()),
                   peer, true, "control from", true);
      left += post(run, ctx_.isend(out, outWords, word, comm_.contextRank(peer), controlTag_, comm_.contextId()),
                   peer, false, "control to", true);
      if (left > 0) ++run.controlsPending;
    }
    run.give[static_cast<size_t>(rank_)] = run.take[static_cast<size_t>(rank_)];
    if (inFlight_ == 1) beginData(run);
  }

  // The previous phase was update()d: own items move, and every pair whose
  // control messages completed gets its data.
  void beginData(InPlacePhaseRun& run) {
    run.dataStage = true;
    if (run.announcing) return;
    copyOwn(run);
    for (int peer = 0; peer < size_; ++peer) {
      if (run.ready[static_cast<size_t>(peer)]) postData(run, peer);
    }
  }

  // Step (3) for one pair, once both of its control messages completed:
  // its data goes without waiting for the phase's other pairs (once the
  // previous phase was update()d).
  void pairData(InPlacePhaseRun& run, int peer) {
    if (gone_[static_cast<size_t>(peer)]) return;  // its control failed
    const int64_t* in = messages_.in(peer);
    if (in[2] != 0) {
      gone_[static_cast<size_t>(peer)] = 1;
      note(makeError(Code::kPeerFailed, "alltoallv (in place) rank ", rank_, ": rank ", peer,
                     " gave up (a failure or mismatch there)"));
      giveUp_ = true;
      return;
    }
    if (run.number == 0 && !pairMatches(peer)) return;
    const int64_t left = sets_.remainingSend(peer) - pendingGive(run, peer).total();
    if (in[0] < 0 || in[1] < 0 || in[0] + in[1] > left) {  // a peer out of step
      gone_[static_cast<size_t>(peer)] = 1;
      note(makeError(Code::kInternal, "alltoallv (in place) rank ", rank_, ": rank ", peer, " asked for ",
                     in[0] + in[1], " items in phase ", run.number, ", ", left, " are left"));
      giveUp_ = true;
      return;
    }
    if (run.number == 0 && messages_.receivesInline(peer)) sets_.deliverInline(peer, messages_.inPayload(peer));
    const int64_t* out = messages_.out(peer);
    if (run.number == 0 && out[kStreamAt] > 0 && in[kStreamAt] > 0) {
      return startStream(peer, out[kStreamAt], in[kStreamAt]);
    }
    run.give[static_cast<size_t>(peer)] = {in[0], in[1]};
    run.ready[static_cast<size_t>(peer)] = 1;
    if (run.dataStage) postData(run, peer);
  }

  void postData(InPlacePhaseRun& run, int peer) {
    run.posted[static_cast<size_t>(peer)] = 1;
    const PhaseCounts& give = run.give[static_cast<size_t>(peer)];
    const PhaseCounts& take = run.take[static_cast<size_t>(peer)];
    const int target = comm_.contextRank(peer);
    if (take.inPlace > 0) {
      post(run, ctx_.irecv(sets_.inPlaceTarget(peer), take.inPlace, args_.recvtype, target, dataTag_,
                           comm_.contextId()),
           peer, true, "items from");
    }
    if (take.aux > 0) {  // held packed (inplace_elements.h)
      post(run, ctx_.irecv(sets_.auxTarget(peer), take.aux, sets_.elements().packed(), target, dataTag_,
                           comm_.contextId()),
           peer, true, "items (auxiliary) from");
    }
    if (give.inPlace > 0) sendItems(run, peer, 0, give.inPlace);
    if (give.aux > 0) sendItems(run, peer, give.inPlace, give.aux);
  }

  // Both ranks announced a slice: the pair leaves the phases (see
  // inplace_pair_stream.h), in chunks of the smaller slice.
  void startStream(int peer, int64_t mine, int64_t theirs) {
    sets_.detach(peer);
    const size_t at = static_cast<size_t>(peer);
    streams_.add({&ctx_, peer, comm_.contextRank(peer), dataTag_, comm_.contextId()}, &sets_.elements(),
                 sets_.blockAt(args_.rdispls[at]), args_.recvcounts[at], std::min(mine, theirs),
                 sets_.streamSlice(peer));
  }

  // Items [skip, skip + count) of what is left for `peer`: one run as it
  // is (packed when it leaves from the copy), several through an hindexed
  // type built for this message.
  void sendItems(InPlacePhaseRun& run, int peer, int64_t skip, int64_t count) {
    sets_.sendRuns(peer, skip, count, runs_);
    const int target = comm_.contextRank(peer);
    if (runs_.size() == 1) {
      const datatype::Datatype& type = sets_.sendsPacked(peer) ? sets_.elements().packed() : args_.recvtype;
      post(run, ctx_.isend(runs_[0].at, count, type, target, dataTag_, comm_.contextId()), peer, false, "items to");
      return;
    }
    std::vector<int64_t> lengths, displs;
    for (const ItemRun& piece : runs_) {
      lengths.push_back(piece.items);
      displs.push_back(piece.at - runs_[0].at);
    }
    auto type = datatype::Datatype::hindexed(lengths, displs, args_.recvtype);
    Status made = type.isOk() ? type->commit() : type.status();
    if (!made.isOk()) return note(made);
    run.types.push_back(*type);
    post(run, ctx_.isend(runs_[0].at, 1, *type, target, dataTag_, comm_.contextId()), peer, false, "items to");
  }

  // This rank's items for itself: from its pieces to the free run or the
  // auxiliary buffer (neither holds a waiting item).
  void copyOwn(const InPlacePhaseRun& run) {
    const PhaseCounts& own = run.take[static_cast<size_t>(rank_)];
    const InPlaceElements& elements = sets_.elements();
    const bool fromPacked = sets_.sendsPacked(rank_);
    std::byte* targets[2] = {sets_.inPlaceTarget(rank_), sets_.auxTarget(rank_)};
    const int64_t counts[2] = {own.inPlace, own.aux};
    int64_t skip = 0;
    for (int part = 0; part < 2; ++part) {
      const bool toPacked = part == 1;  // the auxiliary buffer
      sets_.sendRuns(rank_, skip, counts[part], runs_);
      std::byte* to = targets[part];
      for (const ItemRun& piece : runs_) {
        elements.copy(piece.at, fromPacked, to, toPacked, piece.items);
        to = toPacked ? to + piece.items * elements.packedBytes() : elements.at(to, piece.items);
      }
      skip += counts[part];
    }
  }

  // Step (4) for the older phase, also when giving up: a pair that
  // completed this phase is done on both of its ranks, so a later "gave
  // up" goes exactly to the peers that still expect a control message (the
  // copy path completes pairs in phase 0). A pair whose message failed is
  // out already. Then the newer phase, if any, may post its data.
  void retire() {
    InPlacePhaseRun& run = front();
    if (!run.announcing) {
      for (int peer = 0; peer < size_; ++peer) {  // pairs whose data was not posted moved nothing
        if (peer != rank_ && !run.posted[static_cast<size_t>(peer)]) {
          run.take[static_cast<size_t>(peer)] = {};
          run.give[static_cast<size_t>(peer)] = {};
        }
      }
      sets_.update(run.give, run.take);
      if (inFlight_ == 2) sets_.claim(at(1).take);
    }
    notePeak();
    run.ops.clear();
    run.types.clear();
    frontAt_ = (frontAt_ + 1) % 2;
    --inFlight_;
    if (inFlight_ == 1) beginData(front());
  }

  // 1 when posted; a failed post takes the pair out.
  int post(InPlacePhaseRun& run, Result<Request> request, int peer, bool receive, const char* what,
           bool isControl = false) {
    if (!request.isOk()) {
      failed(run, peer, request.status(), what);
      return 0;
    }
    run.ops.push_back({std::move(*request), peer, receive, isControl, what});
    ++run.opsPending;
    return 1;
  }

  // Collects what completed in both phases. Past the first pending
  // operation of a phase only control messages are tested (each a progress
  // call): they let their pair's data go.
  Status collect(bool& progressed) {
    for (int n = 0; n < inFlight_; ++n) {
      InPlacePhaseRun& run = at(n);
      bool all = true;
      for (size_t i = 0; i < run.ops.size(); ++i) {  // grows as pairs' data is posted
        if (!run.ops[i].request.valid() || (!all && !run.ops[i].control)) continue;
        IBDT_ASSIGN_OR_RETURN(bool done, ctx_.test(run.ops[i].request));
        if (!done) {
          all = false;
          continue;
        }
        finishOp(run, i, ctx_.wait(run.ops[i].request));
        progressed = true;
      }
    }
    return Status::ok();
  }

  void finishOp(InPlacePhaseRun& run, size_t index, Status status) {
    const InPlacePhaseOp& op = run.ops[index];
    const int peer = op.peer;
    const bool control = op.control;
    --run.opsPending;
    const bool longControl = control && op.receive && run.number == 0 && status.code() == Code::kTruncated;
    if (longControl) {
      truncated_[static_cast<size_t>(peer)] = 1;  // its words arrived: the pair check names the mismatch
    } else if (!status.isOk()) {
      failed(run, peer, std::move(status), op.what);
    }
    if (control && --run.controlLeft[static_cast<size_t>(peer)] == 0) {
      --run.controlsPending;
      if (!run.announcing) pairData(run, peer);
    }
  }

  void failed(const InPlacePhaseRun& run, int peer, const Status& status, const char* what) {
    gone_[static_cast<size_t>(peer)] = 1;
    giveUp_ = true;
    note(makeError(status.code(), "alltoallv (in place) rank ", rank_, ", phase ", run.number, ", ", what, " rank ",
                   peer, ": ", status.message()));
  }

  void note(const Status& status) {
    if (outcome_.isOk()) outcome_ = status;
  }

  // The phases are over; streams may still run (poll() ends the run).
  void finish() {
    phasesOver_ = true;
    notePeak();
  }

  void notePeak() {
    const int64_t now = sets_.bytes() + messages_.bytes() + phases_[0].bytes() + phases_[1].bytes() +
                        static_cast<int64_t>(runs_.capacity() * sizeof(ItemRun) + streams_.bytes());
    peak_ = std::max(peak_, now);
  }

  Communicator& comm_;
  messaging::Context& ctx_;
  int rank_, size_;
  AlltoallvArgs args_;
  InPlaceIndexSets sets_;
  int32_t controlTag_ = 0, dataTag_ = 0;
  bool active_ = false;
  bool giveUp_ = false;     // stop: announce it in the next control exchange
  bool announced_ = false;  // a phase that says so was posted: no more phases
  bool phasesOver_ = true;
  Status outcome_;
  int nextPhase_ = 0;
  std::array<InPlacePhaseRun, 2> phases_;  // the phases in flight, a ring of two
  int frontAt_ = 0, inFlight_ = 0;
  std::vector<uint8_t> gone_;  // peers this run no longer exchanges with
  InPlaceControlMessages messages_;
  std::vector<uint8_t> truncated_;  // by peer: its phase-0 control message was longer than expected
  std::vector<ItemRun> runs_;
  InPlacePairStreams streams_;  // pairs streamed outside the phases
  int64_t peak_ = 0;
};

}  // namespace

Result<std::unique_ptr<PlanImpl>> makeInPlaceAlltoallv(Communicator& comm, AlltoallvArgs args, int64_t throttle,
                                                       int64_t auxBytes, int64_t auxBuffers) {
  InPlaceIndexSets::Layout layout;
  layout.base = args.recvbuf;
  layout.rank = comm.rank();
  IBDT_ASSIGN_OR_RETURN(layout.elements, InPlaceElements::create(args.recvtype));
  const int64_t itemSize = layout.elements.packedBytes();
  layout.sendcounts = args.sendcounts;
  layout.sdispls = args.sdispls;
  layout.recvcounts = args.recvcounts;
  layout.rdispls = args.rdispls;
  if (args.recvtype.size() == 0) {  // nothing moves; the pair check still runs
    std::fill(layout.sendcounts.begin(), layout.sendcounts.end(), 0);
    std::fill(layout.recvcounts.begin(), layout.recvcounts.end(), 0);
  }
  InPlaceControlMessages messages(comm.rank(), kControlWords, layout.sendcounts, layout.recvcounts, itemSize);
  for (int peer = 0; peer < comm.size(); ++peer) {
    layout.inlineSend.push_back(messages.sendsInline(peer) ? 1 : 0);
    layout.inlineRecv.push_back(messages.receivesInline(peer) ? 1 : 0);
  }
  IBDT_ASSIGN_OR_RETURN(InPlaceIndexSets sets, InPlaceIndexSets::create(std::move(layout), auxBytes, auxBuffers));
  auto plan = std::make_unique<InPlaceAlltoallv>(comm, std::move(args), std::move(sets), std::move(messages));
  (void)throttle;  // every control exchange is posted at once (one message per peer and phase)
  IBDT_RETURN_IF_ERROR(plan->prepare());
  return std::unique_ptr<PlanImpl>(std::move(plan));
}

}  // namespace ibdt::collectives
