// collectives/inplace_pair_stream.h — a pair of the in-place alltoallv
// exchanged outside the phases (docs/alltoallv.md, "In-place: streamed
// pairs").
//
// When a rank's block to a peer and its block from that peer are the same
// items (MPI's in-place rule makes that so for every pair) and the peer's
// are too, both ranks announce it in phase 0's control message and the
// pair leaves the phases: it swaps its blocks in chunks of c items (the
// smaller of the two announced slices), each chunk one message each way.
// A rank sends its chunk first; when that send completed at once (an eager
// send: its bytes left), the partner's chunk is received straight into the
// slots it freed, else into this rank's own slice of the auxiliary memory
// and copied in place once the send completed. No control message per
// chunk and no waiting for other pairs.
//
// Why it cannot deadlock: both ranks compute the same chunks from the same
// count (the pair check compares the counts). At step k each posts chunk
// k's send and receive back to back, waiting for nothing in between, so
// each step's messages need only the partner to reach step k, which it does
// once its step k - 1 completed; the stream uses no memory or slot that
// another pair or a phase could hold. The phases' termination argument
// (inplace_index_sets.h) is unchanged: a streamed pair's items are not in
// the index sets. Pipelining several chunks per slice was measured slower
// (docs/alltoallv.md, "In-place: the cost of a chunk").
#pragma once

#include <cstdint>
#include <vector>

#include "collectives/inplace_elements.h"
#include "ibdt/messaging.h"
#include "ibdt/status.h"

namespace ibdt::collectives {

class InPlacePairStream {
 public:
  struct Where {
    messaging::Context* ctx = nullptr;
    int peer = 0;    // communicator rank, for errors
    int target = 0;  // the peer's context rank
    int32_t tag = 0;
    uint32_t contextId = 0;
  };
  // `count` items from `block` (the same items are sent and replaced), in
  // chunks of `chunk` items received through `slice` (chunk packed items).
  InPlacePairStream(Where where, const InPlaceElements* elements, std::byte* block, int64_t count, int64_t chunk,
                    std::byte* slice);

  // Posts the first chunk's messages.
  Status start();
  // Completes what finished and posts the next chunk; true once all swapped.
  Result<bool> progress();
  // Waits for one pending message.
  Status block(Deadline deadline);
  void cancel();
  bool done() const { return done_; }
  int peer() const { return where_.peer; }

 private:
  Status post();

  Where where_;
  const InPlaceElements* elements_;
  std::byte* block_;
  int64_t count_, chunk_;
  std::byte* slice_;
  int64_t at_ = 0;  // first item of the chunk in flight
  messaging::Request send_, recv_;
  bool sendDone_ = false, recvDone_ = false, done_ = false;
  bool direct_ = false;  // the chunk in flight is received straight into its slots
};

// A run's streamed pairs: each goes on alone; the first failure is kept and
// stops its stream (the partner sees its own error, as for a dead peer).
class InPlacePairStreams {
 public:
  explicit InPlacePairStreams(size_t peers) { streams_.reserve(peers); }  // no reallocation mid-run

  void clear() {
    streams_.clear();
    outcome_ = Status::ok();
  }
  void add(InPlacePairStream::Where where, const InPlaceElements* elements, std::byte* block, int64_t count,
           int64_t chunk, std::byte* slice);
  // Progresses every stream; true once all are done.
  bool progress();
  // Waits for one pending message of the first stream not done.
  Status block(Deadline deadline);
  void cancel();
  const Status& outcome() const { return outcome_; }
  int64_t bytes() const { return static_cast<int64_t>(streams_.capacity() * sizeof(InPlacePairStream)); }

 private:
  void failed(InPlacePairStream& stream, int peer, const Status& status);  // keeps the first

  std::vector<InPlacePairStream> streams_;
  Status outcome_;
};

}  // namespace ibdt::collectives
