// collectives/inplace_phase_run.h — one phase of the in-place alltoallv in
// flight: what it takes from and gives to each peer, its messages, and
// which pairs' data is posted. At most two are in flight
// (docs/alltoallv.md, "In-place: overlapped phases"): the older one's data
// and the newer one's control messages.
#pragma once

#include <cstdint>
#include <vector>

#include "collectives/inplace_index_sets.h"
#include "ibdt/datatype.h"
#include "ibdt/messaging.h"

namespace ibdt::collectives {

struct InPlacePhaseOp {
  messaging::Request request;
  int peer;
  bool receive, control;
  const char* what;
};

struct InPlacePhaseRun {
  int number = 0;
  bool announcing = false;     // its control messages say "gave up"; it moves nothing
  bool dataStage = false;      // the previous phase was update()d: data may be posted
  bool successorDecided = false;
  std::vector<PhaseCounts> take, give;
  std::vector<uint8_t> ready;    // by peer: both control messages fine, data due
  std::vector<uint8_t> posted;   // by peer: data posted
  std::vector<int> controlLeft;  // by peer: control messages not yet complete
  int controlsPending = 0;       // pairs with a control message not yet complete
  int opsPending = 0;
  std::vector<InPlacePhaseOp> ops;
  std::vector<datatype::Datatype> types;  // the hindexed sends' types, alive until the phase retires

  void begin(int phaseNumber, size_t peers, bool announce) {
    number = phaseNumber;
    announcing = announce;
    dataStage = successorDecided = false;
    take.assign(peers, PhaseCounts{});
    give.assign(peers, PhaseCounts{});
    ready.assign(peers, 0);
    posted.assign(peers, 0);
    controlLeft.assign(peers, 0);
    controlsPending = opsPending = 0;
    ops.clear();
    types.clear();
  }
  bool retirable() const { return controlsPending == 0 && opsPending == 0; }
  int64_t bytes() const {
    return static_cast<int64_t>(ops.capacity() * sizeof(InPlacePhaseOp) +
                                (take.capacity() + give.capacity()) * sizeof(PhaseCounts) + ready.capacity() +
                                posted.capacity() + controlLeft.capacity() * sizeof(int) +
                                types.capacity() * sizeof(datatype::Datatype));
  }
};

}  // namespace ibdt::collectives
