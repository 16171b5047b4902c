// collectives/pairwise_rounds.h — the throttled cyclic round driver shared
// by the direct alltoall and alltoallv (and by the in-place alltoallv's
// request exchange).
//
// Round r (1 <= r < p) sends this rank's block for rank + r and receives the
// block of rank - r (mod p): every pair exchanges in exactly one round and
// no rank is the target of more than one message per round (no hot spot).
// At most `throttle` rounds are in flight: a new one is posted when the
// oldest completes (both its receive and its send), which bounds the
// messages queued at any peer. Round 0, this rank's own block, is a typed
// copy done while the first rounds travel.
//
// In place (PairwiseLayout::inPlace), a block received must not overwrite
// one still to be sent, so rounds pair ranks instead: in round r
// (0 <= r < p) rank i exchanges block (r - i) mod p both ways with that rank
// (an involution; a rank paired with itself idles), like
// MPI_Sendrecv_replace. The block to send is copied into a staging slot
// just before its round starts, one slot per round in flight: extra memory
// min(throttle, p - 1) blocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collectives/plan_impl.h"
#include "collectives/plan_trace.h"
#include "ibdt/collectives.h"
#include "ibdt/datatype.h"

namespace ibdt::collectives {

// What one rank exchanges with one peer (its own rank included).
struct PeerBlock {
  const std::byte* send = nullptr;
  int64_t sendCount = 0;  // elements of the send type
  std::byte* recv = nullptr;
  int64_t recvCount = 0;
};

struct PairwiseLayout {
  datatype::Datatype sendtype, recvtype;
  std::vector<PeerBlock> peers;  // by communicator rank
  // In place: every peer's block is its recv block, sent from staging as
  // `staged` (a dense type of the receive signature) of `stagedBytes`.
  bool inPlace = false;
  datatype::Datatype staged;
  int64_t stagedBytes = 0;
};

class PairwiseRounds final : public PlanImpl {
 public:
  // Prepares every round's send and receive as persistent requests and the
  // own block's typed copy; takes one plan tag from `comm`. `name` prefixes
  // errors ("alltoall (pairwise)").
  static Result<std::unique_ptr<PairwiseRounds>> create(Communicator& comm, PairwiseLayout layout,
                                                        int64_t throttle, std::string name,
                                                        std::string_view algorithm);

  // Leaves the send to / receive from `peer` out of later runs (a pair that
  // cannot match); the caller reports why.
  void skipPeer(int peer, bool send, bool receive);
  // Cancels the receives of the run that no message has matched yet and
  // returns their peers (sends stay pending, to complete as usual): for a
  // caller that knows those messages will not come (checked_alltoallv.cc).
  // Needs every round posted (throttle 0).
  std::vector<int> cancelUnmatchedReceives();

  Status start() override;
  Result<PollResult> poll() override;
  Status block(Deadline deadline) override;
  Status outcome() const override { return outcome_; }
  bool active() const override { return active_; }
  void abandon() override;
  std::string_view algorithm() const override { return algorithm_; }

 private:
  struct Round {
    int round;
    int to, from;
    messaging::Request send, recv;  // persistent
    int64_t sendBytes = 0, recvBytes = 0;  // packed
    bool skipSend = false, skipRecv = false;
  };
  struct Slot {
    Round* round = nullptr;  // null: idle
    bool sendPending = false, recvPending = false;
  };

  PairwiseRounds(Communicator& comm, PairwiseLayout layout, int64_t throttle, std::string name,
                 std::string_view algorithm);
  Status prepare();
  void post(Slot& slot);
  Status complete(Slot& slot, bool receive, bool& pending);
  std::byte* stagingOf(const Round& round);
  void note(Status status, int round, std::string_view what);  // a view: no string built per run

  Communicator& comm_;
  messaging::Context& ctx_;
  uint32_t contextId_;
  int32_t tag_;
  int rank_;
  PairwiseLayout layout_;
  std::string name_;
  std::string_view algorithm_;
  // Round 0, prepared once (none: nothing to copy); in place, the copy of
  // a block into its staging slot.
  std::optional<datatype::TypedCopy> own_;
  std::vector<std::byte> staging_;  // in place: one block per slot
  std::vector<Round> rounds_;
  std::vector<Slot> slots_;
  size_t nextRound_ = 0;
  size_t completed_ = 0;
  size_t head_ = 0;  // slot of the oldest round in flight
  bool active_ = false;
  Status outcome_;
  PlanTracer tracer_;
};

}  // namespace ibdt::collectives
