// StagedPlan: see staged_plan.h.
#include "collectives/staged_plan.h"

#include <algorithm>

namespace ibdt::collectives {

StagedPlan::StagedPlan(Communicator& comm, std::string name, size_t stages)
    : comm_(comm), ctx_(comm.context()), name_(std::move(name)), before_(stages), waitsForSends_(stages, false) {}

Status StagedPlan::addSend(size_t stage, const void* buf, int64_t count, const datatype::Datatype& type, int peer,
                           int32_t tag) {
  IBDT_ASSIGN_OR_RETURN(messaging::Request request,
                        ctx_.sendInit(buf, count, type, comm_.contextRank(peer), tag, comm_.contextId()));
  IBDT_ASSIGN_OR_RETURN(messaging::Request poison,
                        poison_.sendInit(ctx_, comm_.contextRank(peer), tag, comm_.contextId()));
  sends_.push_back(
      {std::move(request), stage, peer, true, count * type.size(), count * type.size(), std::move(poison)});
  sorted_ = false;
  return Status::ok();
}

Status StagedPlan::addRecv(size_t stage, void* buf, int64_t count, const datatype::Datatype& type, int peer,
                           int32_t tag) {
  IBDT_ASSIGN_OR_RETURN(messaging::Request request,
                        ctx_.recvInit(buf, count, type, comm_.contextRank(peer), tag, comm_.contextId()));
  recvs_.push_back({std::move(request), stage, peer, false, count * type.size(), count * type.size()});
  sorted_ = false;
  return Status::ok();
}

Status StagedPlan::addExposure(size_t stage, void* buf, int64_t bytes, int peer, int32_t tag) {
  IBDT_ASSIGN_OR_RETURN(messaging::Request request,
                        ctx_.exposeInit(buf, bytes, comm_.contextRank(peer), tag, comm_.contextId()));
  recvs_.push_back({std::move(request), stage, peer, false, bytes, /*due=*/0});
  sorted_ = false;
  return Status::ok();
}

Status StagedPlan::addPut(size_t stage, const void* buf, int64_t bytes, int peer, int32_t tag) {
  IBDT_ASSIGN_OR_RETURN(messaging::Request request,
                        ctx_.putInit(buf, bytes, comm_.contextRank(peer), tag, comm_.contextId()));
  IBDT_ASSIGN_OR_RETURN(messaging::Request poison,
                        poison_.sendInit(ctx_, comm_.contextRank(peer), tag, comm_.contextId()));
  sends_.push_back({std::move(request), stage, peer, true, bytes, bytes, std::move(poison)});
  sorted_ = false;
  return Status::ok();
}

void StagedPlan::setBefore(size_t stage, std::function<Status()> work) { before_[stage] = std::move(work); }

void StagedPlan::addSubPlan(size_t stage, std::unique_ptr<PlanImpl> plan) {
  subPlans_.push_back({std::move(plan), stage});
}

Communicator& StagedPlan::keep(std::unique_ptr<Communicator> comm) {
  kept_.push_back(std::move(comm));
  return *kept_.back();
}

int64_t StagedPlan::peakExtraBytes() const {
  int64_t bytes = scratchBytes_;
  for (const SubPlan& sub : subPlans_) bytes += sub.plan->peakExtraBytes();
  return bytes;
}

std::byte* StagedPlan::scratch(size_t bytes) {
  scratchBytes_ += static_cast<int64_t>(bytes);
  scratch_.push_back(std::make_unique<std::byte[]>(std::max<size_t>(bytes, 1)));
  return scratch_.back().get();
}

// Stable: transfers of one stage keep the order they were added in, which
// is the order two messages between one pair of ranks match.
void StagedPlan::sortByStage() {
  auto byStage = [](const Transfer& a, const Transfer& b) { return a.stage < b.stage; };
  std::stable_sort(recvs_.begin(), recvs_.end(), byStage);
  std::stable_sort(sends_.begin(), sends_.end(), byStage);
  recvEnd_.assign(before_.size(), 0);
  sendEnd_.assign(before_.size(), 0);
  for (size_t s = 0, r = 0, t = 0; s < before_.size(); ++s) {
    while (r < recvs_.size() && recvs_[r].stage <= s) ++r;
    while (t < sends_.size() && sends_[t].stage <= s) ++t;
    recvEnd_[s] = r;
    sendEnd_[s] = t;
  }
  sorted_ = true;
}

Status StagedPlan::start() {
  if (!sorted_) sortByStage();
  outcome_ = Status::ok();
  begun_ = recvDone_ = sendsStarted_ = sendDone_ = 0;
  active_ = true;
  for (SubPlan& sub : subPlans_) sub.running = false;
  for (Transfer& recv : recvs_) {
    tracer_.record(static_cast<int>(recv.stage), false, recv.peer, recv.bytes);
    Status status = ctx_.start(recv.request);
    recv.pending = status.isOk();
    note(std::move(status), recv);
  }
  if (!before_.empty()) begin(0);
  return Status::ok();
}

void StagedPlan::begin(size_t stage) {
  if (before_[stage]) {
    Status status = before_[stage]();
    if (!status.isOk() && outcome_.isOk()) {
      outcome_ = makeError(status.code(), name_, " rank ", comm_.rank(), ", stage ", stage, ": ", status.message());
    }
  }
  for (; sendsStarted_ < sendEnd_[stage]; ++sendsStarted_) {
    Transfer& send = sends_[sendsStarted_];
    send.poisoned = !outcome_.isOk();
    tracer_.record(static_cast<int>(send.stage), true, send.peer, send.poisoned ? poison_.bytes() : send.bytes);
    Status status = ctx_.start(send.started());
    send.pending = status.isOk();
    note(std::move(status), send);
  }
  for (SubPlan& sub : subPlans_) {
    if (sub.stage != stage) continue;
    Status status = outcome_.isOk() ? sub.plan->start() : sub.plan->startPoisoned(outcome_);
    sub.running = status.isOk();
    noteSubPlan(std::move(status), stage);
  }
  begun_ = stage + 1;
}

Result<bool> StagedPlan::subPlansDone(size_t stage, bool& progressed) {
  for (SubPlan& sub : subPlans_) {
    if (sub.stage > stage || !sub.running) continue;
    IBDT_ASSIGN_OR_RETURN(PollResult result, sub.plan->poll());
    progressed = progressed || result.progressed;
    if (!result.done) return false;
    sub.running = false;
    noteSubPlan(sub.plan->outcome(), sub.stage);
    progressed = true;
  }
  return true;
}

void StagedPlan::noteSubPlan(Status status, size_t stage) {
  if (status.isOk() || !outcome_.isOk()) return;
  outcome_ = makeError(status.code(), name_, " rank ", comm_.rank(), ", stage ", stage, ": ", status.message());
}

Result<bool> StagedPlan::collect(std::vector<Transfer>& transfers, size_t& done, size_t end, bool& progressed) {
  for (; done < end; ++done) {
    Transfer& transfer = transfers[done];
    Status status;
    messaging::RecvInfo info;
    IBDT_ASSIGN_OR_RETURN(bool complete, collectRequest(ctx_, transfer.started(), transfer.pending, status, &info));
    if (!complete) return false;
    if (status.isOk() && !transfer.send) status = receivedAll(info, transfer.due, transfer.peer);
    note(std::move(status), transfer);
    progressed = true;
  }
  return true;
}

Result<PollResult> StagedPlan::poll() {
  PollResult result;
  if (!active_) return PollResult{true, false};
  while (begun_ < before_.size()) {
    IBDT_ASSIGN_OR_RETURN(bool arrived, collect(recvs_, recvDone_, recvEnd_[begun_ - 1], result.progressed));
    if (!arrived) return result;
    IBDT_ASSIGN_OR_RETURN(bool subDone, subPlansDone(begun_ - 1, result.progressed));
    if (!subDone) return result;
    if (waitsForSends_[begun_]) {
      IBDT_ASSIGN_OR_RETURN(bool sent, collect(sends_, sendDone_, sendEnd_[begun_ - 1], result.progressed));
      if (!sent) return result;
    }
    begin(begun_);
    result.progressed = true;
  }
  IBDT_ASSIGN_OR_RETURN(bool received, collect(recvs_, recvDone_, recvs_.size(), result.progressed));
  if (!received) return result;
  IBDT_ASSIGN_OR_RETURN(bool subDone, subPlansDone(before_.size(), result.progressed));
  if (!subDone) return result;
  IBDT_ASSIGN_OR_RETURN(bool sent, collect(sends_, sendDone_, sendsStarted_, result.progressed));
  if (!sent) return result;
  result.done = true;
  active_ = false;
  return result;
}

// Waits on the request the schedule needs next: the oldest receive, else
// the oldest send; messaging's wait progresses the others meanwhile. The
// next poll collects it (and checks what a receive got).
// A running sub-plan is what the next stage waits for (its stage began, so
// the receives before it arrived): its own block.
Status StagedPlan::block(Deadline deadline) {
  for (SubPlan& sub : subPlans_) {
    if (sub.running) return sub.plan->block(deadline);
  }
  Transfer* next = nullptr;
  const bool arrived = begun_ > 0 && begun_ < before_.size() && recvDone_ >= recvEnd_[begun_ - 1];
  if (arrived && sendsHold(begun_))  // the next stage waits for this send, not for later receives
    next = &sends_[sendDone_];
  else if (recvDone_ < recvs_.size())
    next = &recvs_[recvDone_];
  else if (sendDone_ < sendsStarted_)
    next = &sends_[sendDone_];
  if (next == nullptr || !next->pending) return Status::ok();
  Status ignored;  // collected by the next poll
  IBDT_ASSIGN_OR_RETURN(bool done, waitRequest(ctx_, next->started(), deadline, ignored));
  if (!done) {  // the wait gave up: the run stays active
    return makeError(Code::kTimeout, name_, " rank ", comm_.rank(), ": stage ", next->stage,
                     " did not complete in time (", next->send ? "send to" : "receive from", " rank ", next->peer, ")");
  }
  return Status::ok();
}

void StagedPlan::abandon() {
  for (Transfer& recv : recvs_) {
    if (recv.pending) (void)ctx_.cancel(recv.request);
    recv.pending = false;
  }
  for (Transfer& send : sends_) send.pending = false;
  for (SubPlan& sub : subPlans_) {
    if (sub.running) sub.plan->abandon();
    sub.running = false;
  }
  active_ = false;
}

// Keeps the run's first error, naming the stage and peer.
void StagedPlan::note(Status status, const Transfer& transfer) {
  if (status.isOk() || !outcome_.isOk()) return;
  outcome_ = makeError(status.code(), name_, " rank ", comm_.rank(), ", stage ", transfer.stage, ", ",
                       transfer.send ? "send to" : "receive from", " rank ", transfer.peer, ": ", status.message());
}

}  // namespace ibdt::collectives
