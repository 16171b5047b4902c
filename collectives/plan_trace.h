// collectives/plan_trace.h — an optional record of the messages a plan
// posts, round by round: what the test of the schedules against live plans
// compares with alltoallSchedule() (docs/simulator.md).
//
// Off unless a test installs a sink on the thread that builds the plan; a
// plan takes the sink when it is built, so a run pays one null test per
// message it posts.
#pragma once

#include <cstdint>
#include <vector>

namespace ibdt::collectives {

struct TracedMessage {
  int round = 0;      // the plan's round (a Bruck round, a pairwise step, a stage)
  bool send = false;  // else a receive
  int peer = 0;       // communicator rank
  int64_t bytes = 0;  // packed bytes
  bool operator==(const TracedMessage&) const = default;
};
using PlanTrace = std::vector<TracedMessage>;

// The sink of the plans built on this thread (nullptr: none).
inline PlanTrace*& planTraceOfThisThread() {
  thread_local PlanTrace* sink = nullptr;
  return sink;
}

// A plan's member: the sink in force when the plan was built.
class PlanTracer {
 public:
  PlanTracer() : sink_(planTraceOfThisThread()) {}
  void record(int round, bool send, int peer, int64_t bytes) const {
    if (sink_ != nullptr) [[unlikely]]
      sink_->push_back({round, send, peer, bytes});
  }

 private:
  PlanTrace* sink_;
};

// Installs `sink` for the plans this thread builds while in scope.
class ScopedPlanTrace {
 public:
  explicit ScopedPlanTrace(PlanTrace& sink) : previous_(planTraceOfThisThread()) { planTraceOfThisThread() = &sink; }
  ~ScopedPlanTrace() { planTraceOfThisThread() = previous_; }
  ScopedPlanTrace(const ScopedPlanTrace&) = delete;
  ScopedPlanTrace& operator=(const ScopedPlanTrace&) = delete;

 private:
  PlanTrace* previous_;
};

}  // namespace ibdt::collectives
