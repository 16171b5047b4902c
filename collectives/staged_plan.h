// collectives/staged_plan.h — a plan made of stages, for collectives whose
// rounds depend on what earlier rounds received (small collectives, the
// hierarchical alltoall).
//
// Stage s begins once every receive of the stages before it completed: its
// local work (`before`, e.g. a copy of what arrived) runs, then its sends
// start. Every receive of every stage is started at start(), so a message
// never waits for its receive to be posted; two receives from one peer with
// one tag match in stage order, the order that peer sends them. The run
// completes when the last stage began and every request completed. A failed
// request still lets the later stages run (no peer is left waiting); the
// first error is the run's outcome, and every send of a later stage is a
// poison instead of data (collectives/poison.h: what a stage sends may be
// what an earlier one received, so it would be stale). A stage may also
// run a whole plan (the hierarchical alltoall's Bruck between leaders, on
// another communicator): started when the stage begins, after its sends
// (poisoned too once the run failed); the next stage begins once it is done
// too. Node-local hops may be one-sided (addExposure / addPut: a write
// into the peer's buffer and a notification, with no handshake); a stage
// that lets peers overwrite what earlier sends read waits for those sends
// (waitForSends). Requests are persistent and buffers are allocated at
// init, so a run allocates nothing.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectives/plan_impl.h"
#include "collectives/plan_trace.h"
#include "collectives/poison.h"
#include "ibdt/collectives.h"

namespace ibdt::collectives {

class StagedPlan final : public PlanImpl {
 public:
  StagedPlan(Communicator& comm, std::string name, size_t stages);

  // --- init ---
  // A message of count x type to / from communicator rank `peer`.
  Status addSend(size_t stage, const void* buf, int64_t count, const datatype::Datatype& type, int peer, int32_t tag);
  Status addRecv(size_t stage, void* buf, int64_t count, const datatype::Datatype& type, int peer, int32_t tag);
  // One-sided (messaging's exposeInit / putInit): `buf` is exposed to
  // `peer`, which writes it whole in its run; a receive of `stage`, done
  // when the write landed (a poison fails it, as a message's receive).
  // Sends the key now: every exposure of an init goes out before any rank's
  // addPut waits for one.
  Status addExposure(size_t stage, void* buf, int64_t bytes, int peer, int32_t tag);
  // The write of [buf, buf + bytes) into `peer`'s exposed buffer, a send of
  // `stage` (a poison message instead once the run failed). Waits for the
  // peer's key. The caller orders the runs: the peer's buffer must be free
  // when `stage` begins.
  Status addPut(size_t stage, const void* buf, int64_t bytes, int peer, int32_t tag);
  // `stage` also waits for every send of the stages before it: what they
  // read may be overwritten by a peer's put once `stage` has begun.
  void waitForSends(size_t stage) { waitsForSends_[stage] = true; }
  // Local work run when `stage` begins (must not allocate).
  void setBefore(size_t stage, std::function<Status()> work);
  // A plan started when `stage` begins (it must not allocate either).
  void addSubPlan(size_t stage, std::unique_ptr<PlanImpl> plan);
  // Keeps a communicator a sub-plan runs on for the plan's lifetime.
  Communicator& keep(std::unique_ptr<Communicator> comm);
  // A zeroed buffer owned by the plan (stable address).
  std::byte* scratch(size_t bytes);

  // --- PlanImpl ---
  Status start() override;
  Result<PollResult> poll() override;
  Status block(Deadline deadline) override;
  Status outcome() const override { return outcome_; }
  bool active() const override { return active_; }
  void abandon() override;
  std::string_view algorithm() const override { return name_; }
  int64_t peakExtraBytes() const override;

 private:
  struct Transfer {
    messaging::Request request;  // persistent
    size_t stage;
    int peer;
    bool send;
    int64_t bytes;              // packed
    int64_t due = 0;            // what a receive must get (an exposure's notification: none)
    messaging::Request poison;  // a send's, started instead once the run failed
    bool pending = false;
    bool poisoned = false;  // this run sent the poison
    messaging::Request& started() { return poisoned ? poison : request; }
  };

  struct SubPlan {
    std::unique_ptr<PlanImpl> plan;
    size_t stage;
    bool running = false;
  };

  void sortByStage();
  // Polls the sub-plans of stages <= `stage`; whether all of them are done.
  Result<bool> subPlansDone(size_t stage, bool& progressed);
  void begin(size_t stage);
  // Collects transfers[done..end) in order; false at the first still pending.
  Result<bool> collect(std::vector<Transfer>& transfers, size_t& done, size_t end, bool& progressed);
  // Whether stage `stage` waits for sends of earlier stages that are still pending.
  bool sendsHold(size_t stage) const {
    return stage < before_.size() && waitsForSends_[stage] && sendDone_ < sendEnd_[stage - 1];
  }
  void note(Status status, const Transfer& transfer);
  void noteSubPlan(Status status, size_t stage);

  const Communicator& comm_;
  messaging::Context& ctx_;
  std::string name_;
  std::vector<std::function<Status()>> before_;      // per stage
  std::vector<bool> waitsForSends_;                  // per stage
  std::vector<Transfer> recvs_, sends_;              // sorted by stage at the first start()
  std::vector<size_t> recvEnd_, sendEnd_;            // transfers of stages <= s end here
  std::vector<std::unique_ptr<Communicator>> kept_;  // outlives subPlans_ (declared before)
  std::vector<SubPlan> subPlans_;
  std::vector<std::unique_ptr<std::byte[]>> scratch_;
  int64_t scratchBytes_ = 0;
  bool sorted_ = false;
  size_t begun_ = 0;     // stages begun
  size_t recvDone_ = 0;  // receives collected, in stage order
  size_t sendsStarted_ = 0, sendDone_ = 0;
  bool active_ = false;
  Status outcome_;
  PlanTracer tracer_;
  Poison poison_;
};

}  // namespace ibdt::collectives
