// collectives/plan_impl.h — what every collective algorithm implements.
//
// A PlanImpl is built once with everything its runs need (peers, offsets,
// types, tag) and then only posts messages and copies: start() must not
// check arguments, construct types or register memory again.
#pragma once

#include <cstdint>
#include <string_view>

#include "ibdt/deadline.h"
#include "ibdt/messaging.h"
#include "ibdt/status.h"

namespace ibdt::collectives {

// What one poll of a running plan found.
struct PollResult {
  bool done = false;        // every round completed
  bool progressed = false;  // something completed or was posted (resets the wait's backoff)
};

class PlanImpl {
 public:
  virtual ~PlanImpl() = default;
  // Posts the first rounds. Called only when not active().
  virtual Status start() = 0;
  // Starts a run that forwards nothing, as a part of a bigger plan whose run
  // already failed (`cause`): every message it would send carrying data it
  // received is a poison (collectives/poison.h), so ranks downstream fail
  // too. A plan that sends only its caller's own data may start normally.
  virtual Status startPoisoned(Status cause) {
    (void)cause;
    return start();
  }
  // Drives progress once and posts the rounds that became possible.
  virtual Result<PollResult> poll() = 0;
  // Blocks until some operation of the run completes, waiting the way the
  // transport waits (its spin/yield policy, IBDT_MSG_SPIN); kTimeout at
  // `deadline`. The completion is collected (and the next round posted) by
  // the following poll().
  virtual Status block(Deadline deadline) = 0;
  // The run's outcome once poll() said done: its first error, or ok.
  virtual Status outcome() const = 0;
  virtual bool active() const = 0;
  // Cancels what can be cancelled of an active run (the plan goes away).
  virtual void abandon() = 0;
  virtual std::string_view algorithm() const = 0;
  // Moves the inactive plan to other buffers (Plan::rebind); kUnsupported
  // where the algorithm cannot.
  virtual Status rebind(const void* sendbuf, void* recvbuf) {
    (void)sendbuf;
    (void)recvbuf;
    return makeError(Code::kUnsupported, algorithm(), " plans cannot move to other buffers; build a new plan");
  }
  // Moves the inactive alltoall plan to other buffers and types whose blocks
  // hold as many packed bytes (Plan::rebind with types); kUnsupported where
  // the peers would have to know.
  virtual Status rebindTypes(const void* sendbuf, int64_t sendcount, const datatype::Datatype& sendtype, void* recvbuf,
                             int64_t recvcount, const datatype::Datatype& recvtype) {
    (void)sendbuf, (void)sendcount, (void)sendtype, (void)recvbuf, (void)recvcount, (void)recvtype;
    return makeError(Code::kUnsupported, algorithm(), " plans cannot change their types; build a new plan");
  }
  // Scratch the algorithm allocated itself (see Plan::peakExtraBytes).
  virtual int64_t peakExtraBytes() const { return 0; }
};

// Waits for a persistent request (plans start theirs again and again) until
// `deadline`; returns whether it completed, with its own status in
// `outcome`. A wait that gave up is never taken for a request that failed,
// nor a request that completed just after for one that timed out.
Result<bool> waitRequest(messaging::Context& ctx, messaging::Request& request, Deadline deadline, Status& outcome);

// Collects a started persistent request without blocking: if `pending` and
// it completed, clears `pending` and puts its status in `outcome` (and a
// receive's RecvInfo in `info`). Returns whether it is no longer pending;
// only a failure of progress is an error.
Result<bool> collectRequest(messaging::Context& ctx, messaging::Request& request, bool& pending, Status& outcome,
                            messaging::RecvInfo* info = nullptr);

}  // namespace ibdt::collectives
