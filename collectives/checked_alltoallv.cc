// The pairwise alltoallv whose first run checks only the changed pairs, on
// a tag of its own (see checked_alltoallv.h).
#include "collectives/checked_alltoallv.h"

#include <algorithm>

#include "collectives/alltoallv_args.h"
#include "collectives/pair_signature_check.h"
#include "collectives/plan_impl.h"

namespace ibdt::collectives {

std::vector<uint8_t> PairCheckHistory::admit(const AlltoallvArgs& args, int self) {
  const size_t size = args.sendcounts.size();
  if (pairs_.size() != size) pairs_.assign(size, std::nullopt);
  std::vector<uint8_t> check(size, 0);
  for (size_t peer = 0; peer < size; ++peer) {
    if (static_cast<int>(peer) == self) continue;  // the own block is checked at init
    const Pair now{args.sendSignatures[peer], args.recvSignatures[peer]};
    check[peer] = pairs_[peer] != now;
    pairs_[peer] = now;
  }
  return check;
}

void PairCheckHistory::keepEarly(int peer, const int64_t* words) {
  if (early_.size() <= static_cast<size_t>(peer)) early_.resize(static_cast<size_t>(peer) + 1);
  Message message;
  std::copy_n(words, message.size(), message.begin());
  early_[static_cast<size_t>(peer)] = message;
}

std::optional<PairCheckHistory::Message> PairCheckHistory::takeEarly(int peer, int64_t call) {
  if (early_.size() <= static_cast<size_t>(peer) || !early_[static_cast<size_t>(peer)]) return std::nullopt;
  std::optional<Message>& kept = early_[static_cast<size_t>(peer)];
  const int64_t keptCall = kept->back();
  if (keptCall > call) return std::nullopt;  // for a call still to come
  std::optional<Message> taken = keptCall == call ? kept : std::nullopt;
  kept.reset();  // used, or from a call that did not check this pair: dropped
  return taken;
}

namespace {

using messaging::Request;

constexpr size_t kCallWord = PairSignatureCheck::kWords;  // in a check message

class CheckedAlltoallv final : public PlanImpl {
 public:
  CheckedAlltoallv(Communicator& comm, AlltoallvArgs args, std::shared_ptr<PairCheckHistory> history, int64_t call)
      : comm_(comm), args_(std::move(args)), history_(std::move(history)), call_(call) {}

  Status prepare(int32_t checkTag, int64_t throttle) {
    rank_ = comm_.rank();
    checkTag_ = checkTag;
    IBDT_ASSIGN_OR_RETURN(data_,
                          PairwiseRounds::create(comm_, args_.layout(), throttle, "alltoallv (pairwise)", "pairwise"));
    for (int peer = 0; peer < comm_.size(); ++peer) before_.push_back(history_->checked(peer));
    const std::vector<uint8_t> needed = history_->admit(args_, rank_);
    if (std::find(needed.begin(), needed.end(), 1) == needed.end()) return Status::ok();  // no pair changed
    const int32_t dataTag = comm_.pinnedPlanTag();
    comm_.pinPlanTag(checkTag);
    // Throttle 0: every check round is posted at start (settle() needs it).
    auto check = PairSignatureCheck::create(comm_, args_, 0, call_);
    comm_.pinPlanTag(dataTag);
    IBDT_ASSIGN_OR_RETURN(check_, std::move(check));
    check_->dataStillExchanged();
    for (int peer = 0; peer < comm_.size(); ++peer) {
      if (peer == rank_) continue;
      if (!needed[static_cast<size_t>(peer)]) {
        check_->skipPeer(peer);
      } else if (auto early = history_->takeEarly(peer, call_)) {
        check_->useKnown(peer, early->data());  // it arrived during an earlier call
      }
    }
    return Status::ok();
  }

  Status start() override {
    checking_ = check_ != nullptr && !checked_;
    settled_ = false;
    if (checking_) IBDT_RETURN_IF_ERROR(check_->rounds().start());  // posted before the data (see the header)
    return data_->start();
  }

  Result<PollResult> poll() override {
    PollResult result;
    if (data_->active()) {
      IBDT_ASSIGN_OR_RETURN(result, data_->poll());
    }
    if (checking_) {
      if (!data_->active() && !settled_) settle();
      IBDT_ASSIGN_OR_RETURN(PollResult checked, check_->rounds().poll());
      result.progressed = result.progressed || checked.progressed;
      if (checked.done && !reviewed_) review();
      if (checked.done) pollAgain(result.progressed);
      if (checked.done && again_.empty()) finishCheck();
    }
    result.done = !data_->active() && !checking_;
    return result;
  }

  Status block(Deadline deadline) override {
    if (data_->active()) return data_->block(deadline);  // messaging's wait progresses the check too
    if (!checking_) return Status::ok();
    if (!again_.empty()) return comm_.context().progress();  // settled: each receive is matched or cancelled
    return check_->rounds().block(deadline);
  }
  Status outcome() const override { return mismatch_.isOk() ? data_->outcome() : mismatch_; }
  bool active() const override { return checking_ || data_->active(); }
  void abandon() override {
    if (checking_) check_->rounds().abandon();
    for (Again& again : again_) (void)comm_.context().cancel(again.request);
    again_.clear();
    data_->abandon();
    checking_ = false;
  }
  std::string_view algorithm() const override { return "pairwise"; }
  int64_t peakExtraBytes() const override { return check_ != nullptr ? check_->bytes() : 0; }

 private:
  struct Again {  // a check receive posted again after a stale message
    int peer;
    Request request;
  };

  // Every data message arrived, so every check message a peer sent arrived
  // before it: the receives still unmatched are from peers that did not check.
  void settle() {
    settled_ = true;
    for (int peer : check_->rounds().cancelUnmatchedReceives()) silent(peer);
    for (size_t i = 0; i < again_.size();) {
      if (!cancelUnmatched(again_[i])) {
        ++i;
        continue;
      }
      silent(again_[i].peer);
      again_.erase(again_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }

  bool cancelUnmatched(Again& again) {
    if (!comm_.context().cancel(again.request).isOk()) return false;  // matched: completes as usual
    (void)comm_.context().wait(again.request);                         // kCancelled
    return true;
  }

  // The rounds are done: which messages belong to this call (see the header).
  void review() {
    reviewed_ = true;
    for (int peer = 0; peer < comm_.size(); ++peer) {
      if (peer != rank_) sortMessage(peer);
    }
  }

  // Looks at the message received from `peer` (nothing received: nothing to do).
  void sortMessage(int peer) {
    const int64_t* words = check_->received(peer);
    if (words[1] < 0 || words[kCallWord] == call_) return;  // no message, or this call's
    if (words[kCallWord] > call_) {                            // the peer's next call: it did not check in this one
      history_->keepEarly(peer, words);
      return silent(peer);
    }
    const datatype::Datatype word = datatype::Datatype::of<int64_t>();  // stale: the next message instead
    Result<Request> request =
        comm_.context().irecv(check_->received(peer), static_cast<int64_t>(PairSignatureCheck::kMessageWords), word,
                              comm_.contextRank(peer), checkTag_, comm_.contextId());
    if (!request.isOk()) return silent(peer);
    again_.push_back({peer, std::move(*request)});
    if (settled_ && cancelUnmatched(again_.back())) {  // everything the peer sent this call is here already
      again_.pop_back();
      silent(peer);
    }
  }

  void pollAgain(bool& progressed) {
    for (size_t i = 0; i < again_.size();) {
      Result<bool> done = comm_.context().test(again_[i].request);
      if (done.isOk() && !*done) {
        ++i;
        continue;
      }
      progressed = true;
      const int peer = again_[i].peer;
      const bool received = done.isOk() && comm_.context().wait(again_[i].request).isOk();
      again_.erase(again_.begin() + static_cast<std::ptrdiff_t>(i));
      if (received) sortMessage(peer);  // may be stale again: posts another receive at the end
      else silent(peer);
    }
  }

  void silent(int peer) {
    silent_.push_back(peer);
    check_->noteSilent(peer, makeError(Code::kInvalidArgument, "alltoallv rank ", rank_, ": rank ", peer,
                                       " did not check its counts and types with this rank: they did not change "
                                       "on rank ", peer, " since the last call that checked them, while this "
                                       "rank's changed, so the pair cannot match in both calls (the blocks were "
                                       "exchanged and checked on arrival)"));
  }

  void finishCheck() {
    std::vector<uint8_t> sendOk, recvOk;
    mismatch_ = check_->verdict(sendOk, recvOk);
    for (size_t peer = 0; peer < sendOk.size(); ++peer) {
      if (!sendOk[peer] || !recvOk[peer]) history_->forget(static_cast<int>(peer));  // checked again next time
    }
    for (int peer : silent_) history_->restore(peer, before_[static_cast<size_t>(peer)]);
    checked_ = true;
    checking_ = false;
  }

  Communicator& comm_;
  AlltoallvArgs args_;
  std::shared_ptr<PairCheckHistory> history_;
  int64_t call_;
  int rank_ = 0;
  int32_t checkTag_ = 0;
  std::unique_ptr<PairwiseRounds> data_;
  std::unique_ptr<PairSignatureCheck> check_;  // null: no pair changed
  std::vector<Again> again_;
  std::vector<std::optional<PairCheckHistory::Pair>> before_;  // by peer: the history before this plan
  std::vector<int> silent_;                                     // peers that did not check
  bool checked_ = false, checking_ = false, settled_ = false, reviewed_ = false;
  Status mismatch_;
};

}  // namespace

Result<Plan> checkedAlltoallvInit(Communicator& comm, int32_t checkTag, int64_t call,
                                  std::shared_ptr<PairCheckHistory> history,
                                  const void* sendbuf, std::span<const int64_t> sendcounts,
                                  std::span<const int64_t> sdispls, const datatype::Datatype& sendtype,
                                  void* recvbuf, std::span<const int64_t> recvcounts,
                                  std::span<const int64_t> rdispls, const datatype::Datatype& recvtype,
                                  int64_t throttle) {
  if (!comm.planTagPinned() || history == nullptr) {
    return makeError(Code::kState, "checked alltoallv: needs a pinned plan tag (its data's) and a pair history");
  }
  if (sendbuf == kInPlace) return makeError(Code::kInvalidArgument, "checked alltoallv: kInPlace is not supported");
  if (throttle < 0) {
    return makeError(Code::kInvalidArgument, "alltoallv: throttle ", throttle, " (0: unlimited, else >= 1)");
  }
  IBDT_ASSIGN_OR_RETURN(AlltoallvArgs args, checkAlltoallvArgs(comm, sendbuf, sendcounts, sdispls, sendtype, recvbuf,
                                                               recvcounts, rdispls, recvtype));
  auto plan = std::make_unique<CheckedAlltoallv>(comm, std::move(args), std::move(history), call);
  IBDT_RETURN_IF_ERROR(plan->prepare(checkTag, throttle));
  comm.countAlgorithm("alltoallv", "pairwise", false);
  return Plan(std::unique_ptr<PlanImpl>(std::move(plan)));
}

}  // namespace ibdt::collectives
