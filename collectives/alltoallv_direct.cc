// Direct (pairwise) alltoallv: the cyclic round driver of the alltoall over
// per-peer blocks. The first run starts with the pair check (six int64 per
// peer), so a pair whose signatures differ fails on both ranks before any of
// its data moves; later runs go straight to the data rounds (counts and
// types are fixed at init), so a persistent alltoallv costs what a
// persistent alltoall does.
#include "base/log.h"
#include "collectives/alltoall_direct_write.h"
#include "collectives/alltoallv_algorithms.h"
#include "collectives/pair_signature_check.h"

namespace ibdt::collectives {
namespace {

class DirectAlltoallv final : public PlanImpl {
 public:
  explicit DirectAlltoallv(AlltoallvArgs args) : args_(std::move(args)) {}

  Status prepare(Communicator& comm, int64_t throttle) {
    IBDT_ASSIGN_OR_RETURN(check_, PairSignatureCheck::create(comm, args_, throttle));
    IBDT_ASSIGN_OR_RETURN(data_,
                          PairwiseRounds::create(comm, args_.layout(), throttle, "alltoallv (pairwise)", "pairwise"));
    return Status::ok();
  }

  Status start() override {
    checking_ = !checked_;
    return checking_ ? check_->rounds().start() : data_->start();
  }

  Result<PollResult> poll() override {
    if (!checking_) return data_->poll();
    IBDT_ASSIGN_OR_RETURN(PollResult polled, check_->rounds().poll());
    if (!polled.done) return polled;
    finishCheck();
    IBDT_RETURN_IF_ERROR(data_->start());
    return PollResult{!data_->active(), true};
  }

  Status block(Deadline deadline) override { return phase().block(deadline); }
  Status outcome() const override { return mismatch_.isOk() ? data_->outcome() : mismatch_; }
  bool active() const override { return checking_ || data_->active(); }
  void abandon() override {
    phase().abandon();
    checking_ = false;
  }
  std::string_view algorithm() const override { return "pairwise"; }
  int64_t peakExtraBytes() const override { return check_->bytes(); }

 private:
  PairwiseRounds& phase() { return checking_ ? check_->rounds() : *data_; }

  // Leaves out of every run the pairs that cannot match (or whose peer
  // failed); their error is each run's outcome.
  void finishCheck() {
    std::vector<uint8_t> sendOk, recvOk;
    mismatch_ = check_->verdict(sendOk, recvOk);
    for (size_t peer = 0; peer < sendOk.size(); ++peer) {
      if (!sendOk[peer] || !recvOk[peer]) data_->skipPeer(static_cast<int>(peer), !sendOk[peer], !recvOk[peer]);
    }
    checked_ = true;
    checking_ = false;
  }

  AlltoallvArgs args_;
  std::unique_ptr<PairSignatureCheck> check_;
  std::unique_ptr<PairwiseRounds> data_;
  bool checked_ = false, checking_ = false;
  Status mismatch_;
};

}  // namespace

Result<std::unique_ptr<PlanImpl>> makeDirectAlltoallv(Communicator& comm, AlltoallvArgs args, int64_t throttle) {
  auto plan = std::make_unique<DirectAlltoallv>(std::move(args));
  IBDT_RETURN_IF_ERROR(plan->prepare(comm, throttle));
  return std::unique_ptr<PlanImpl>(std::move(plan));
}

Result<std::unique_ptr<PlanImpl>> makeDirectWriteAlltoallv(Communicator& comm, Result<AlltoallvArgs> checked,
                                                           int64_t throttle) {
  const bool ok = checked.isOk();
  IBDT_ASSIGN_OR_RETURN(int64_t vote, agreeOnDirectWrite(comm, ok, ok && checked->inPlace,
                                                         ok ? checked->sendtype : datatype::Datatype(),
                                                         ok ? checked->recvtype : datatype::Datatype()));
  if (!ok) return std::move(checked).takeStatus();
  AlltoallvArgs args = std::move(checked).value();
  if (args.inPlace) {
    return makeError(Code::kInvalidArgument, "alltoallv (direct-write): kInPlace is not supported; use the in-place "
                                             "algorithm");
  }
  if (vote == 0) {
    return makeError(Code::kInvalidArgument, "alltoallv (direct-write): the arguments failed on another rank");
  }
  if (vote == 1) {
    IBDT_LOG(kDebug, "alltoallv direct-write: a rank's types are not dense blocks; every rank runs pairwise");
    return makeDirectAlltoallv(comm, std::move(args), throttle);
  }
  return buildDirectWriteAlltoallv(comm, args);
}

Result<std::unique_ptr<PlanImpl>> buildDirectWriteAlltoallv(Communicator& comm, const AlltoallvArgs& args) {
  std::vector<DirectBlock> blocks;
  for (int peer = 0; peer < comm.size(); ++peer) {
    const auto index = static_cast<size_t>(peer);
    blocks.push_back({args.sendBlock(peer), args.sendcounts[index] * args.sendtype.size(), args.recvBlock(peer),
                      args.recvcounts[index] * args.recvtype.size()});
  }
  return makeDirectWrite(comm, args.sendbuf, args.recvbuf, std::move(blocks), true);
}

}  // namespace ibdt::collectives
