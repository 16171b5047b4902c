// Dissemination barrier (Hensgen, Finkel and Manber): in round k every rank
// sends an empty message to rank + 2^k and waits for the one from
// rank - 2^k (mod p), and sends round k + 1 only after that arrived. After
// ceil(log2 p) rounds every rank has heard, through some chain, from every
// other, so none leaves before all have entered.
//
// Every receive is started at start() (each round has its own source, so
// they cannot take each other's messages); the requests are persistent, so
// a run allocates no operation. A failed receive (a dead peer) still lets
// the later rounds go out, so the ranks that wait on this one do not hang,
// but as poisons (collectives/poison.h): an empty message there would tell
// them every rank had entered, and they would leave a barrier that a dead
// rank never reached. A receive that meets a poison fails (it expects
// nothing) and poisons this rank's later rounds in turn.
#include <vector>

#include "collectives/plan_impl.h"
#include "collectives/poison.h"
#include "ibdt/collectives.h"

namespace ibdt::collectives {
namespace {

using messaging::Request;

class DisseminationBarrier final : public PlanImpl {
 public:
  explicit DisseminationBarrier(Communicator& comm)
      : comm_(comm), ctx_(comm.context()), contextId_(comm.contextId()), tag_(comm.takePlanTag()),
        rank_(comm.rank()) {
    const int size = comm.size();
    for (int distance = 1; distance < size; distance *= 2) {
      rounds_.push_back({(rank_ + distance) % size, (rank_ - distance + size) % size});
    }
  }

  Status prepare() {
    const datatype::Datatype byte = datatype::Datatype::basic(datatype::BasicKind::kByte);
    for (Round& round : rounds_) {
      IBDT_ASSIGN_OR_RETURN(round.recv, ctx_.recvInit(nullptr, 0, byte, comm_.contextRank(round.from), tag_, contextId_));
      IBDT_ASSIGN_OR_RETURN(round.send, ctx_.sendInit(nullptr, 0, byte, comm_.contextRank(round.to), tag_, contextId_));
      IBDT_ASSIGN_OR_RETURN(round.poison, poison_.sendInit(ctx_, comm_.contextRank(round.to), tag_, contextId_));
    }
    return Status::ok();
  }

  Status start() override {
    outcome_ = Status::ok();
    arrived_ = 0;
    active_ = !rounds_.empty();
    for (Round& round : rounds_) {
      round.sendPending = false;
      Status status = ctx_.start(round.recv);
      round.recvPending = status.isOk();
      note(std::move(status), "receive from", round.from);
    }
    if (active_) send(rounds_.front());
    return Status::ok();
  }

  Result<PollResult> poll() override {
    PollResult result;
    while (arrived_ < rounds_.size()) {
      Round& round = rounds_[arrived_];
      Status status;
      IBDT_ASSIGN_OR_RETURN(bool done, collectRequest(ctx_, round.recv, round.recvPending, status));
      if (!done) break;
      note(std::move(status), "receive from", round.from);
      ++arrived_;
      result.progressed = true;
      if (arrived_ < rounds_.size()) send(rounds_[arrived_]);
    }
    if (arrived_ == rounds_.size()) {  // every round's send must have left too
      for (Round& round : rounds_) {
        Status status;
        IBDT_ASSIGN_OR_RETURN(bool done, collectRequest(ctx_, round.sent(), round.sendPending, status));
        if (!done) return result;
        note(std::move(status), "send to", round.to);
      }
      result.done = true;
      active_ = false;
    }
    return result;
  }

  Status block(Deadline deadline) override {
    Round* pending = nullptr;
    bool receive = true;
    if (arrived_ < rounds_.size()) {
      pending = &rounds_[arrived_];
      if (!pending->recvPending) return Status::ok();
    } else {
      for (Round& round : rounds_) {
        if (round.sendPending) {
          pending = &round;
          receive = false;
          break;
        }
      }
    }
    if (pending == nullptr) return Status::ok();
    Request& request = receive ? pending->recv : pending->sent();
    const int peer = receive ? pending->from : pending->to;
    Status status;
    IBDT_ASSIGN_OR_RETURN(bool done, waitRequest(ctx_, request, deadline, status));
    if (!done) {  // the wait gave up: the run stays active
      return makeError(Code::kTimeout, "barrier rank ", rank_, ": no message from rank ", peer, " in time (",
                       receive ? "receive" : "send", " of round ", pending - rounds_.data(), ")");
    }
    (receive ? pending->recvPending : pending->sendPending) = false;
    note(std::move(status), receive ? "receive from" : "send to", peer);
    return Status::ok();
  }

  Status outcome() const override { return outcome_; }
  bool active() const override { return active_; }

  void abandon() override {
    for (Round& round : rounds_) {
      if (round.recvPending) (void)ctx_.cancel(round.recv);
      round.recvPending = round.sendPending = false;
    }
    active_ = false;
  }

  std::string_view algorithm() const override { return "dissemination"; }

 private:
  struct Round {
    int to, from;
    Request send, recv, poison;  // persistent
    bool sendPending = false, recvPending = false;
    bool poisoned = false;  // this run sent the poison, not the empty message
    Request& sent() { return poisoned ? poison : send; }
  };

  void send(Round& round) {
    round.poisoned = !outcome_.isOk();
    Status status = ctx_.start(round.sent());
    round.sendPending = status.isOk();
    note(std::move(status), "send to", round.to);
  }

  // Keeps the run's first error, naming the peer; a receive truncated by a
  // poison says that the peer's run had failed.
  void note(Status status, const char* what, int peer) {
    if (status.isOk() || !outcome_.isOk()) return;
    if (status.code() == Code::kTruncated) {
      outcome_ = makeError(Code::kPeerFailed, "barrier rank ", rank_, ", ", what, " rank ", peer,
                           ": its barrier had failed in an earlier round (a rank of the communicator failed)");
      return;
    }
    outcome_ = makeError(status.code(), "barrier rank ", rank_, ", ", what, " rank ", peer, ": ", status.message());
  }

  const Communicator& comm_;
  messaging::Context& ctx_;
  uint32_t contextId_;
  int32_t tag_;
  int rank_;
  Poison poison_;  // what a failed run sends in later rounds (its address stays put: the plan is on the heap)
  std::vector<Round> rounds_;
  size_t arrived_ = 0;  // rounds whose message arrived, in order
  bool active_ = false;
  Status outcome_;
};

}  // namespace

Result<Plan> barrierInit(Communicator& comm) {
  auto plan = std::make_unique<DisseminationBarrier>(comm);
  IBDT_RETURN_IF_ERROR(plan->prepare());
  return Plan(std::move(plan));
}

Status barrier(Communicator& comm, Deadline deadline) {
  IBDT_ASSIGN_OR_RETURN(Plan plan, barrierInit(comm));
  IBDT_RETURN_IF_ERROR(plan.start());
  return plan.wait(deadline);
}

}  // namespace ibdt::collectives
