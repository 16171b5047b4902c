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

namespace {

class CheckedAlltoallv final : public PlanImpl {
 public:
  CheckedAlltoallv(AlltoallvArgs args, std::shared_ptr<PairCheckHistory> history)
      : args_(std::move(args)), history_(std::move(history)) {}

  Status prepare(Communicator& comm, int32_t checkTag, int64_t throttle) {
    rank_ = comm.rank();
    IBDT_ASSIGN_OR_RETURN(data_,
                          PairwiseRounds::create(comm, args_.layout(), throttle, "alltoallv (pairwise)", "pairwise"));
    const std::vector<uint8_t> needed = history_->admit(args_, rank_);
    if (std::find(needed.begin(), needed.end(), 1) == needed.end()) return Status::ok();  // no pair changed
    const int32_t dataTag = comm.pinnedPlanTag();
    comm.pinPlanTag(checkTag);
    // Throttle 0: every check round is posted at start (settle() needs it).
    auto check = PairSignatureCheck::create(comm, args_, 0);
    comm.pinPlanTag(dataTag);
    IBDT_ASSIGN_OR_RETURN(check_, std::move(check));
    check_->dataStillExchanged();
    for (int peer = 0; peer < comm.size(); ++peer) {
      if (peer != rank_ && !needed[static_cast<size_t>(peer)]) check_->skipPeer(peer);
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
      if (checked.done) finishCheck();
    }
    result.done = !data_->active() && !checking_;
    return result;
  }

  Status block(Deadline deadline) override {
    if (data_->active()) return data_->block(deadline);  // messaging's wait progresses the check too
    return checking_ ? check_->rounds().block(deadline) : Status::ok();
  }
  Status outcome() const override { return mismatch_.isOk() ? data_->outcome() : mismatch_; }
  bool active() const override { return checking_ || data_->active(); }
  void abandon() override {
    if (checking_) check_->rounds().abandon();
    data_->abandon();
    checking_ = false;
  }
  std::string_view algorithm() const override { return "pairwise"; }
  int64_t peakExtraBytes() const override { return check_ != nullptr ? check_->bytes() : 0; }

 private:
  // Every data message arrived, so every check message a peer sent arrived
  // before it: the receives still unmatched are from peers that did not check.
  void settle() {
    settled_ = true;
    for (int peer : check_->rounds().cancelUnmatchedReceives()) {
      check_->noteSilent(peer, makeError(Code::kInvalidArgument, "alltoallv rank ", rank_, ": rank ", peer,
                                         " did not check its counts and types with this rank: they did not change "
                                         "on rank ", peer, " since the last call that checked them, while this "
                                         "rank's changed, so the pair cannot match in both calls (the blocks were "
                                         "exchanged and checked on arrival)"));
    }
  }

  void finishCheck() {
    std::vector<uint8_t> sendOk, recvOk;
    mismatch_ = check_->verdict(sendOk, recvOk);
    for (size_t peer = 0; peer < sendOk.size(); ++peer) {
      if (!sendOk[peer] || !recvOk[peer]) history_->forget(static_cast<int>(peer));  // checked again next time
    }
    checked_ = true;
    checking_ = false;
  }

  AlltoallvArgs args_;
  std::shared_ptr<PairCheckHistory> history_;
  int rank_ = 0;
  std::unique_ptr<PairwiseRounds> data_;
  std::unique_ptr<PairSignatureCheck> check_;  // null: no pair changed
  bool checked_ = false, checking_ = false, settled_ = false;
  Status mismatch_;
};

}  // namespace

Result<Plan> checkedAlltoallvInit(Communicator& comm, int32_t checkTag, std::shared_ptr<PairCheckHistory> history,
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
  auto plan = std::make_unique<CheckedAlltoallv>(std::move(args), std::move(history));
  IBDT_RETURN_IF_ERROR(plan->prepare(comm, checkTag, throttle));
  comm.countAlgorithm("alltoallv", "pairwise", false);
  return Plan(std::unique_ptr<PlanImpl>(std::move(plan)));
}

}  // namespace ibdt::collectives
