// Plan: the handle every collective algorithm returns, and the wait loop
// they share.
#include "collectives/plan_impl.h"
#include "ibdt/collectives.h"

namespace ibdt::collectives {

Plan::Plan() = default;
Plan::Plan(std::unique_ptr<PlanImpl> impl) : impl_(std::move(impl)) {}
Plan::Plan(Plan&& other) noexcept : impl_(std::move(other.impl_)), started_(other.started_) {}
Plan& Plan::operator=(Plan&& other) noexcept {
  if (this != &other) {
    if (impl_ != nullptr && impl_->active()) impl_->abandon();
    impl_ = std::move(other.impl_);
    started_ = other.started_;
  }
  return *this;
}
Plan::~Plan() {
  if (impl_ != nullptr && impl_->active()) impl_->abandon();
}

Status Plan::start() {
  if (impl_ == nullptr) return makeError(Code::kInvalidArgument, "collective start: empty plan");
  if (impl_->active()) return makeError(Code::kState, impl_->algorithm(), " start: the previous run is still active");
  IBDT_RETURN_IF_ERROR(impl_->start());
  started_ = true;
  return Status::ok();
}

Result<bool> Plan::test(bool* progressed) {
  if (impl_ == nullptr) return makeError(Code::kInvalidArgument, "collective test: empty plan");
  if (!impl_->active()) {
    if (!started_) return makeError(Code::kState, impl_->algorithm(), " test: the plan was not started");
    return true;  // the last run completed
  }
  IBDT_ASSIGN_OR_RETURN(PollResult polled, impl_->poll());
  if (progressed != nullptr) *progressed = polled.done || polled.progressed;
  return polled.done;
}

Status Plan::wait(Deadline deadline) {
  if (impl_ == nullptr) return makeError(Code::kInvalidArgument, "collective wait: empty plan");
  if (!impl_->active()) {
    if (!started_) return makeError(Code::kState, impl_->algorithm(), " wait: the plan was not started");
    return impl_->outcome();  // the last run completed (a test() saw it)
  }
  for (;;) {
    IBDT_ASSIGN_OR_RETURN(PollResult polled, impl_->poll());
    if (polled.done) return impl_->outcome();
    if (polled.progressed) continue;  // post what became possible before blocking
    IBDT_RETURN_IF_ERROR(impl_->block(deadline));
  }
}

Result<bool> waitRequest(messaging::Context& ctx, messaging::Request& request, Deadline deadline, Status& outcome) {
  (void)ctx.wait(request, nullptr, deadline);  // kTimeout or the request's status: told apart below
  IBDT_ASSIGN_OR_RETURN(bool done, ctx.test(request));
  if (done) outcome = ctx.wait(request);  // completed: returns its status at once
  return done;
}

Result<bool> collectRequest(messaging::Context& ctx, messaging::Request& request, bool& pending, Status& outcome,
                            messaging::RecvInfo* info) {
  if (!pending) return true;
  IBDT_ASSIGN_OR_RETURN(bool done, ctx.test(request, info));
  if (!done) return false;
  pending = false;
  outcome = ctx.wait(request);
  return true;
}

int64_t Plan::peakExtraBytes() const { return impl_ != nullptr ? impl_->peakExtraBytes() : 0; }

Status Plan::rebind(const void* sendbuf, void* recvbuf) {
  if (impl_ == nullptr) return makeError(Code::kInvalidArgument, "collective rebind: empty plan");
  if (impl_->active()) return makeError(Code::kState, impl_->algorithm(), " rebind: a run is active");
  return impl_->rebind(sendbuf, recvbuf);
}

Status Plan::rebind(const void* sendbuf, int64_t sendcount, const datatype::Datatype& sendtype, void* recvbuf,
                    int64_t recvcount, const datatype::Datatype& recvtype) {
  if (impl_ == nullptr) return makeError(Code::kInvalidArgument, "collective rebind: empty plan");
  if (impl_->active()) return makeError(Code::kState, impl_->algorithm(), " rebind: a run is active");
  return impl_->rebindTypes(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype);
}

bool Plan::active() const { return impl_ != nullptr && impl_->active(); }

std::string_view Plan::algorithm() const { return impl_ != nullptr ? impl_->algorithm() : "none"; }

}  // namespace ibdt::collectives
