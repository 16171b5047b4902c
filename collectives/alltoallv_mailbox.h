// collectives/alltoallv_mailbox.h — alltoallv calls of one node's ranks
// through a segment made once per communicator, with no agreement per call
// (docs/alltoall-shared-memory.md, "The mailbox").
//
// For callers that build nothing collectively per call: the MPI bridge's
// blocking MPI_Alltoallv, whose ranks may each pass other counts, types and
// buffers from call to call. Each call is self-describing. A rank writes
// into its row a header (per peer where its block lies and the bytes and
// signature it sends and expects) and its packed blocks, and beside its
// flag a verdict (its blocks fit the row, do not fit, or its arguments were
// refused), then raises its flag. Once every flag rose, every rank reads
// the same verdicts and headers, so every rank takes the same decision:
// copy out (a pair whose two sides disagree fails on both of its ranks,
// naming the peer), fail alike (a rank refused its arguments), or give the
// call back (some rank's blocks did not fit: every caller then runs its
// usual path). Nothing was written into a receive buffer before that
// decision, in place included. A pair checked once is not read again while
// neither side's prepared call changes (its generation sits beside the
// flag), so a repeated call reads a flag line and a block per peer.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "collectives/alltoallv_args.h"
#include "collectives/mailbox_single_copy.h"
#include "collectives/shared_runs_plan.h"

namespace ibdt::collectives {

// A peer's block as last checked: valid while neither side's call changed.
struct MailboxPairCache {
  int64_t theirs = 0, ours = 0;  // the generations checked (0: none)
  int64_t at = 0;                // our block within its row's data
  int64_t bytes = 0;             // its packed bytes
  uint64_t address = 0;          // or in the writer's buffer (single copy), else 0
};

// One rank's side of one call, prepared for a mailbox (this blocking one,
// or the non-blocking calls' of ialltoall_mailbox.h): kept and run again
// while the caller's arguments repeat (a rank-local decision).
class MailboxCall {
 public:
  // `checked` failed: the call is refused (every rank learns it in the run).
  // Dense send blocks of at least `singleCopyFrom` bytes (0: none) are
  // read by their readers straight out of our send buffer, not our row
  // (mailbox_single_copy.h), if all our blocks would take more than
  // `lendBeyond` bytes of the row (IalltoallMailbox::lendBeyondBytes).
  static MailboxCall prepare(Result<AlltoallvArgs> checked, int64_t singleCopyFrom = 0, int64_t lendBeyond = 0);

  bool refused() const { return !refusal_.isOk(); }
  const Status& refusal() const { return refusal_; }
  int64_t generation() const { return generation_; }
  // Every outgoing block that goes through the row, our own included.
  int64_t rowBytes() const { return rowBytes_; }
  // Whether a peer reads a block of ours out of our send buffer.
  bool lendsBuffer() const { return lends_; }
  // The bytes of the pair views a row's header holds for `p` ranks.
  static int64_t headerBytes(int p);

  // Writes our row: the pair views into `header`, unless `headerGeneration`
  // says it already describes this call (then set to it), and the blocks
  // into `data` (skipped when null). A refused call writes nothing. The
  // packing's error, if any.
  Status writeRow(std::byte* header, int64_t& headerGeneration, std::byte* data) const;
  // Our block from `source`'s row (`theirHeader`, `theirData`, written for
  // its call of generation `theirGeneration`): both directions of the pair
  // checked (so that both of its ranks fail alike) unless `pair` holds that
  // check, then copied out (`theirData` null: only checked). A block the
  // writer lends is read through `reads` (into `scratch` first when our
  // receive side is strided).
  Status readPair(int source, int rank, int64_t theirGeneration, const std::byte* theirHeader,
                  const std::byte* theirData, MailboxPairCache& pair, std::string_view what,
                  const SingleCopyReads* reads = nullptr, std::vector<std::byte>* scratch = nullptr) const;

 private:
  Status refusal_;
  int64_t generation_ = 0;  // distinct per prepared call: peers cache their check of it
  AlltoallvArgs args_;
  std::vector<int64_t> views_;  // kPairSlots per peer (alltoallv_pair_view.h)
  int64_t rowBytes_ = 0;        // the outgoing blocks in the row, our own included
  bool sendDense_ = false, recvDense_ = false, lends_ = false;
  std::optional<datatype::Segment> send_, recv_;  // the largest block's count: any block's prefix
};

class AlltoallvMailbox {
 public:
  // Collective over `comm` (one node): a row holds shareBytes / 2 of data
  // (AlltoallvOptions::inplaceBytes in the bridge: two rows of data per
  // rank, plus a flag line and two headers of 56 bytes per peer), so a call
  // fits when each rank's outgoing bytes fit capacity(); ranks that pass
  // different budgets get the smallest. Every rank returns the same
  // verdict; null when a row could hold no data.
  // Its exchanges are pairwise alltoalls, so a dead rank fails every
  // survivor's create (no survivor waits for it).
  static Result<std::unique_ptr<AlltoallvMailbox>> create(Communicator& comm, int64_t shareBytes,
                                                          Deadline deadline = Deadline::never());

  // Every rank calls it for the same call, in the order of its other
  // collectives on the communicator. True: the call ran here (`outcome`
  // holds this rank's result); false on every rank alike: some rank's blocks
  // did not fit its row, run the call another way. An error: the mailbox is
  // broken (a deadline passed while a peer had not written, or a peer died)
  // and refuses later calls.
  Result<bool> run(MailboxCall& call, Deadline deadline, Status& outcome);

  int64_t capacity() const { return capacity_; }

 private:
  AlltoallvMailbox(Communicator& comm, SharedRegion segment, int64_t header, int64_t capacity)
      : comm_(comm),
        segment_(std::move(segment)),
        header_(header),
        capacity_(capacity),
        pairs_(static_cast<size_t>(comm.size())) {}
  std::byte* row(uint64_t run, int rank) const;
  int64_t* flagLine(int rank) const;
  Status awaitAll(Deadline deadline);

  Communicator& comm_;
  SharedRegion segment_;
  const int64_t header_;    // a row's header: the pair views, rounded to a line
  const int64_t capacity_;  // a row's data
  std::vector<MailboxPairCache> pairs_;
  int64_t written_[2] = {0, 0};  // the generation each phase's header of our row describes
  uint64_t run_ = 0;
  Status broken_;
};

}  // namespace ibdt::collectives
