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
// completed, not waiting for the other pairs (up to two messages per
// direction: the in-place part and the auxiliary part, matched in order)
// and, once everything completed, (4) updates the index sets. Own items are
// copied locally when the phase starts.
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

#include "collectives/alltoallv_algorithms.h"
#include "collectives/inplace_control_messages.h"
#include "collectives/inplace_index_sets.h"
#include "collectives/inplace_pair_stream.h"
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
    ops_.reserve(6 * size);  // per peer: 2 control, up to 2 data each way (no reallocation mid-phase)
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
    phase_ = 0;
    ops_.clear();
    messages_.pack(args_.recvbuf, args_.sdispls, sets_.elements());  // before reset() moves anything
    sets_.reset();
    gone_.assign(gone_.size(), 0);
    truncated_.assign(truncated_.size(), 0);
    giveUp_ = false;
    streams_.clear();
    beginControl();
    return Status::ok();
  }

  Result<PollResult> poll() override {
    PollResult result;
    while (stage_ != Stage::kDone) {
      streams_.progress();
      IBDT_ASSIGN_OR_RETURN(bool all, collect(result.progressed));
      if (!all) return result;
      if (announcing_) finish();  // announced; every active peer heard it
      else afterData();
      result.progressed = true;
    }
    if (!streams_.progress()) return result;
    note(streams_.outcome());
    active_ = false;
    notePeak();
    result.done = true;
    return result;
  }

  // Waits for the first operation of the phase still pending, else for a
  // stream's.
  Status block(Deadline deadline) override {
    if (stage_ == Stage::kDone) return streams_.block(deadline);
    for (size_t i = 0; i < ops_.size(); ++i) {
      Op& op = ops_[i];
      if (!op.request.valid()) continue;
      Status status = ctx_.wait(op.request, nullptr, deadline);
      if (op.request.valid()) {  // still pending: the wait gave up, the run stays active
        return makeError(Code::kTimeout, "alltoallv (in place) rank ", rank_, ": phase ", phase_, " ", op.what,
                         " rank ", op.peer, " did not complete in time");
      }
      finishOp(i, std::move(status));
      return Status::ok();
    }
    return Status::ok();
  }

  Status outcome() const override { return outcome_; }
  bool active() const override { return active_; }
  void abandon() override {
    for (Op& op : ops_) {
      if (op.request.valid() && op.receive) (void)ctx_.cancel(op.request);
    }
    ops_.clear();
    streams_.cancel();
    stage_ = Stage::kDone;
    active_ = false;
  }
  std::string_view algorithm() const override { return "in-place"; }
  int64_t peakExtraBytes() const override { return peak_; }

 private:
  enum class Stage : uint8_t { kPhase, kDone };
  struct Op {
    Request request;
    int peer;
    bool receive, control;
    const char* what;
  };

  // Phase 0 exchanges with every peer (the pair check), later phases with
  // the peers this rank still has items to send to or receive from.
  bool pairActive(int peer) const {
    return peer != rank_ && !gone_[static_cast<size_t>(peer)] &&
           (phase_ == 0 || sets_.remainingSend(peer) > 0 || sets_.remainingRecv(peer) > 0);
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

  // Step (1) and (2): what to take, told to every active peer.
  void beginControl() {
    ops_.clear();
    announcing_ = giveUp_;  // what every peer of this phase is told, whatever fails while posting
    if (announcing_ || (phase_ == 0 && sets_.done())) {  // phase 0 still checks every pair
      take_.assign(static_cast<size_t>(size_), PhaseCounts{});
    } else {
      if (sets_.done()) return finish();
      sets_.requests(take_, phase_ % size_, phase_ == 0);
    }
    const size_t size = static_cast<size_t>(size_);
    give_.assign(size, PhaseCounts{});
    posted_.assign(size, 0);
    controlLeft_.assign(size, 0);
    phaseTypes_.clear();
    const datatype::Datatype word = datatype::Datatype::of<int64_t>();
    for (int peer = 0; peer < size_; ++peer) {
      if (!pairActive(peer)) continue;
      controlLeft_[static_cast<size_t>(peer)] = 2;
      int64_t* out = messages_.out(peer);
      // Phase 0 carries the inline blocks (inplace_control_messages.h).
      const int64_t outWords = phase_ == 0 ? messages_.outWords(peer) : static_cast<int64_t>(kControlWords);
      const int64_t inWords = phase_ == 0 ? messages_.inWords(peer) : static_cast<int64_t>(kControlWords);
      out[0] = take_[static_cast<size_t>(peer)].inPlace;
      out[1] = take_[static_cast<size_t>(peer)].aux;
      out[2] = announcing_ ? 1 : 0;
      out[kStreamAt] = phase_ == 0 ? sets_.streamItems(peer) : 0;
      post(ctx_.irecv(messages_.in(peer), inWords, word, comm_.contextRank(peer), controlTag_, comm_.contextId()),
           peer, true, "control from", true);
      post(ctx_.isend(out, outWords, word, comm_.contextRank(peer), controlTag_, comm_.contextId()), peer, false,
           "control to", true);
    }
    if (!announcing_) {
      give_[static_cast<size_t>(rank_)] = take_[static_cast<size_t>(rank_)];
      copyOwn();
    }
    stage_ = Stage::kPhase;
  }

  // Step (3) for one pair, once both of its control messages completed:
  // its data goes without waiting for the phase's other pairs.
  void pairData(int peer) {
    if (!pairActive(peer)) return;  // its control failed
    const int64_t* in = messages_.in(peer);
    if (in[2] != 0) {
      gone_[static_cast<size_t>(peer)] = 1;
      note(makeError(Code::kPeerFailed, "alltoallv (in place) rank ", rank_, ": rank ", peer,
                     " gave up (a failure or mismatch there)"));
      giveUp_ = true;
      return;
    }
    if (phase_ == 0 && !pairMatches(peer)) return;
    if (in[0] < 0 || in[1] < 0 || in[0] + in[1] > sets_.remainingSend(peer)) {  // a peer out of step
      gone_[static_cast<size_t>(peer)] = 1;
      note(makeError(Code::kInternal, "alltoallv (in place) rank ", rank_, ": rank ", peer, " asked for ",
                     in[0] + in[1], " items in phase ", phase_, ", ", sets_.remainingSend(peer), " are left"));
      giveUp_ = true;
      return;
    }
    if (phase_ == 0 && messages_.receivesInline(peer)) sets_.deliverInline(peer, messages_.inPayload(peer));
    const int64_t* out = messages_.out(peer);
    if (phase_ == 0 && out[kStreamAt] > 0 && in[kStreamAt] > 0) return startStream(peer, out[kStreamAt], in[kStreamAt]);
    give_[static_cast<size_t>(peer)] = {in[0], in[1]};
    posted_[static_cast<size_t>(peer)] = 1;
    postData(peer);
  }

  void postData(int peer) {
    const PhaseCounts& give = give_[static_cast<size_t>(peer)];
    const PhaseCounts& take = take_[static_cast<size_t>(peer)];
    const int target = comm_.contextRank(peer);
    if (take.inPlace > 0) {
      post(ctx_.irecv(sets_.inPlaceTarget(peer), take.inPlace, args_.recvtype, target, dataTag_, comm_.contextId()),
           peer, true, "items from");
    }
    if (take.aux > 0) {  // held packed (inplace_elements.h)
      post(ctx_.irecv(sets_.auxTarget(peer), take.aux, sets_.elements().packed(), target, dataTag_,
                      comm_.contextId()),
           peer, true, "items (auxiliary) from");
    }
    if (give.inPlace > 0) sendItems(peer, 0, give.inPlace);
    if (give.aux > 0) sendItems(peer, give.inPlace, give.aux);
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
  void sendItems(int peer, int64_t skip, int64_t count) {
    sets_.sendRuns(peer, skip, count, runs_);
    const int target = comm_.contextRank(peer);
    if (runs_.size() == 1) {
      const datatype::Datatype& type = sets_.sendsPacked(peer) ? sets_.elements().packed() : args_.recvtype;
      post(ctx_.isend(runs_[0].at, count, type, target, dataTag_, comm_.contextId()), peer, false, "items to");
      return;
    }
    std::vector<int64_t> lengths, displs;
    for (const ItemRun& run : runs_) {
      lengths.push_back(run.items);
      displs.push_back(run.at - runs_[0].at);
    }
    auto type = datatype::Datatype::hindexed(lengths, displs, args_.recvtype);
    Status made = type.isOk() ? type->commit() : type.status();
    if (!made.isOk()) return note(made);
    phaseTypes_.push_back(*type);
    post(ctx_.isend(runs_[0].at, 1, *type, target, dataTag_, comm_.contextId()), peer, false, "items to");
  }

  // This rank's items for itself: from its pieces to the free run or the
  // auxiliary buffer (neither holds a waiting item).
  void copyOwn() {
    const PhaseCounts& own = take_[static_cast<size_t>(rank_)];
    const InPlaceElements& elements = sets_.elements();
    const bool fromPacked = sets_.sendsPacked(rank_);
    std::byte* targets[2] = {sets_.inPlaceTarget(rank_), sets_.auxTarget(rank_)};
    const int64_t counts[2] = {own.inPlace, own.aux};
    int64_t skip = 0;
    for (int part = 0; part < 2; ++part) {
      const bool toPacked = part == 1;  // the auxiliary buffer
      sets_.sendRuns(rank_, skip, counts[part], runs_);
      std::byte* to = targets[part];
      for (const ItemRun& run : runs_) {
        elements.copy(run.at, fromPacked, to, toPacked, run.items);
        to = toPacked ? to + run.items * elements.packedBytes() : elements.at(to, run.items);
      }
      skip += counts[part];
    }
  }

  // Step (4), also when giving up: a pair that completed this phase is done
  // on both of its ranks, so the next phase's "gave up" goes exactly to the
  // peers that still expect a control message (the copy path completes
  // pairs in phase 0). A pair whose message failed is out already.
  void afterData() {
    for (int peer = 0; peer < size_; ++peer) {  // pairs whose data was not posted moved nothing
      if (peer != rank_ && !posted_[static_cast<size_t>(peer)]) take_[static_cast<size_t>(peer)] = {};
    }
    sets_.update(give_, take_);
    notePeak();
    ++phase_;
    beginControl();
  }

  void post(Result<Request> request, int peer, bool receive, const char* what, bool isControl = false) {
    if (!request.isOk()) return failed(peer, request.status(), what);
    ops_.push_back({std::move(*request), peer, receive, isControl, what});
  }

  // Collects what completed; true when nothing of the phase is pending.
  // Past the first pending operation only control messages are tested
  // (each a progress call): they let their pair's data go.
  Result<bool> collect(bool& progressed) {
    bool all = true;
    for (size_t i = 0; i < ops_.size(); ++i) {  // grows as pairs' data is posted
      if (!ops_[i].request.valid() || (!all && !ops_[i].control)) continue;
      IBDT_ASSIGN_OR_RETURN(bool done, ctx_.test(ops_[i].request));
      if (!done) {
        all = false;
        continue;
      }
      finishOp(i, ctx_.wait(ops_[i].request));
      progressed = true;
    }
    return all;
  }

  void finishOp(size_t index, Status status) {
    const Op& op = ops_[index];
    const int peer = op.peer;
    const bool longControl = op.control && op.receive && phase_ == 0 && status.code() == Code::kTruncated;
    if (longControl) {
      truncated_[static_cast<size_t>(peer)] = 1;  // its words arrived: the pair check names the mismatch
    } else if (!status.isOk()) {
      failed(peer, std::move(status), op.what);
    }
    if (op.control && --controlLeft_[static_cast<size_t>(peer)] == 0 && !announcing_) pairData(peer);
  }

  void failed(int peer, const Status& status, const char* what) {
    gone_[static_cast<size_t>(peer)] = 1;
    giveUp_ = true;
    note(makeError(status.code(), "alltoallv (in place) rank ", rank_, ", phase ", phase_, ", ", what, " rank ", peer,
                   ": ", status.message()));
  }

  void note(const Status& status) {
    if (outcome_.isOk()) outcome_ = status;
  }

  // The phases are over; streams may still run (poll() ends the run).
  void finish() {
    ops_.clear();
    stage_ = Stage::kDone;
    notePeak();
  }

  void notePeak() {
    const int64_t now = sets_.bytes() + messages_.bytes() +
                        static_cast<int64_t>(ops_.capacity() * sizeof(Op) + runs_.capacity() * sizeof(ItemRun) +
                                             streams_.bytes());
    peak_ = std::max(peak_, now);
  }

  Communicator& comm_;
  messaging::Context& ctx_;
  int rank_, size_;
  AlltoallvArgs args_;
  InPlaceIndexSets sets_;
  int32_t controlTag_ = 0, dataTag_ = 0;
  bool active_ = false;
  bool giveUp_ = false;      // stop: announce it in the next control exchange
  bool announcing_ = false;  // this phase's control exchange says so
  Status outcome_;
  Stage stage_ = Stage::kDone;
  int phase_ = 0;
  std::vector<uint8_t> gone_;  // peers this run no longer exchanges with
  InPlaceControlMessages messages_;
  std::vector<uint8_t> truncated_;  // by peer: its phase-0 control message was longer than expected
  std::vector<PhaseCounts> take_, give_;
  std::vector<uint8_t> posted_;      // by peer: its data was posted this phase
  std::vector<int> controlLeft_;     // by peer: control messages of this phase still pending
  std::vector<Op> ops_;
  std::vector<ItemRun> runs_;
  std::vector<datatype::Datatype> phaseTypes_;  // the hindexed sends' types, alive until the phase ends
  InPlacePairStreams streams_;                  // pairs streamed outside the phases
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
