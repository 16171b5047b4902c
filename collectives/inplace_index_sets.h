// collectives/inplace_index_sets.h — the local bookkeeping of the in-place
// alltoallv (Hofmann/Rünger, Sections 3.2 to 3.5): which items of the one
// buffer still wait to be sent, where incoming items may land, and the
// auxiliary buffers. No messages here; alltoallv_inplace.cc drives the
// phases.
//
// Items are elements of the receive type (inplace_elements.h: in the buffer
// in the type's layout, packed everywhere else). Send set S_i = the items for rank i
// still here, kept as at most 3p pieces: each lies outside every receive
// set or inside exactly one (split at the receive sets' bounds, Sect. 3.2).
// Receive set R_j = [placed_j, count_j) of rank j's block: a prefix is
// placed, then come items held in an auxiliary buffer, then the rest. After
// each phase the pieces inside R_j are moved to its top (Sect. 3.4), so its
// free space is one run right above the placed prefix and every freed slot
// can be used; held items are then moved in from the auxiliary buffer.
//
// Why it terminates for any counts (Sect. 3.1, Siegel/Siegel): if no rank
// could receive anything, every unplaced slot of every R_j would hold a
// waiting piece; there are as many waiting items as unreceived ones, so no
// item can sit in an auxiliary buffer, all of them are empty, and any pair
// with items left can move at least one through one. So every phase moves
// an item somewhere until all have arrived.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "collectives/inplace_elements.h"
#include "ibdt/status.h"

namespace ibdt::collectives {

// Items one rank takes from one peer in a phase: first into the peer's block
// in place, then into its auxiliary buffer.
struct PhaseCounts {
  int64_t inPlace = 0, aux = 0;
  int64_t total() const { return inPlace + aux; }
};

// A run of consecutive items: in the buffer (typed) or in the copy (packed).
struct ItemRun {
  std::byte* at;
  int64_t items;
};

class InPlaceIndexSets {
 public:
  struct Layout {
    std::byte* base = nullptr;
    int rank = -1;  // this rank
    InPlaceElements elements;
    std::vector<int64_t> sendcounts, sdispls, recvcounts, rdispls;  // in items, by rank
    // Blocks carried inside phase-0 control messages (inplace_control_messages.h):
    // by rank, 1 when its outgoing / incoming block goes that way.
    std::vector<uint8_t> inlineSend, inlineRecv;
  };
  // `auxBytes` (at least one item): first the inline blocks (both ways,
  // while they fit), then the copy path's blocks (inplace_copy.h), the rest
  // split into up to `auxBuffers` buffers of whole items; never more than
  // `auxBytes` in all beyond the inline blocks.
  static Result<InPlaceIndexSets> create(Layout layout, int64_t auxBytes, int64_t auxBuffers);

  // Starts a run from the caller's blocks: splits the send sets and joins the
  // free space of every receive set (moves items inside the buffer).
  void reset();
  int64_t remainingSend(int peer) const { return counts(sendcount_, peer) - sent_[index(peer)]; }
  int64_t remainingRecv(int peer) const {
    return counts(recvcount_, peer) - placed_[index(peer)] - held(peer) - staged_[index(peer)];
  }
  bool done() const;

  // Sect. 3.3 with the auxiliary buffers (Sect. 3.5): what this rank can
  // take from every peer; claims auxiliary buffers for it. `first` rotates
  // which peer claims a shared buffer first. Phase 0 asks nothing from
  // peers whose pair may stream (below): the pair's verdict comes with
  // phase 0's control messages.
  // `pending`: what the phase in flight (its data posted, not yet
  // update()d) takes; empty when none is. The requests then stay valid
  // whatever that phase's update does (docs/alltoallv.md, "In-place:
  // overlapped phases"): in place only above the pending in-place part and
  // only when nothing is or will be held, into a buffer only after what is
  // pending there, and never into a buffer another peer claimed.
  void requests(std::vector<PhaseCounts>& take, int first, bool phase0, const std::vector<PhaseCounts>& pending);
  // After update(): the buffers the next phase's `take` claimed stay its
  // own (update() frees a buffer it drained).
  void claim(const std::vector<PhaseCounts>& take);

  // Pairs streamed outside the phases (inplace_pair_stream.h): a peer whose
  // block to and from this rank are the same items (same displacement and
  // count; MPI's in-place rule gives that for every pair) may stream in
  // chunks of up to streamItems(peer) through its own slice of a (0: no).
  int64_t streamItems(int peer) const { return streamItems_[index(peer)]; }
  std::byte* streamSlice(int peer) { return streamData_.data() + streamAt_[index(peer)] * itemSize_; }
  std::byte* blockAt(int64_t displ) const { return item(displ); }
  // The pair streams: its items leave the index sets (they are moved by the
  // stream, not by the phases). Before phase 0's data of this pair.
  void detach(int peer);
  // Where the items from `peer` land this phase.
  std::byte* inPlaceTarget(int peer) const;
  std::byte* auxTarget(int peer) const;
  // The inline block from `peer` arrived at `from` (alive until the run
  // ends); update() places it once its receive block has room.
  void deliverInline(int peer, const std::byte* from) { stagedFrom_[index(peer)] = from; }
  // Items [skip, skip + count) of what is left for `peer`, as runs: packed
  // when its block was copied out (sendsPacked), else typed in the buffer.
  bool sendsPacked(int peer) const { return copied_[index(peer)] != 0; }
  void sendRuns(int peer, int64_t skip, int64_t count, std::vector<ItemRun>& runs) const;
  // Sect. 3.4 once a phase's messages completed: drops the sent items,
  // counts the received ones, joins free space, places held items.
  void update(const std::vector<PhaseCounts>& sent, const std::vector<PhaseCounts>& received);

  const InPlaceElements& elements() const { return elements_; }
  // Scratch held: auxiliary buffers and bookkeeping.
  int64_t bytes() const;

 private:
  struct Piece {
    int peer;
    int64_t at;      // first item's index in the buffer
    int64_t length;  // items left
    int recvSet;     // rank whose receive block holds it, or -1
  };
  struct AuxBuffer {
    std::vector<std::byte> data;
    int64_t capacity = 0, used = 0;  // items
    int owner = -1;                  // the rank whose items it holds (first come, first served)
  };

  explicit InPlaceIndexSets(Layout layout);
  static int64_t counts(const std::vector<int64_t>& values, int peer) { return values[index(peer)]; }
  static size_t index(int peer) { return static_cast<size_t>(peer); }
  int64_t held(int peer) const;
  AuxBuffer& auxOf(int peer) { return aux_[index(peer) % aux_.size()]; }
  const AuxBuffer& auxOf(int peer) const { return aux_[index(peer) % aux_.size()]; }
  std::byte* item(int64_t at) const { return elements_.at(base_, at); }
  void split();
  void compact(int recvSet);
  void place(int recvSet);
  void placeStaged(int recvSet);
  int64_t fillFreeRun(size_t recvSet, const std::byte* from, int64_t items);

  std::byte* base_;
  int rank_;
  InPlaceElements elements_;
  int64_t itemSize_;  // packed bytes of one item
  int size_;
  std::vector<int64_t> sendcount_, sdispl_, recvcount_, rdispl_;
  std::vector<int64_t> sent_, placed_, occupied_;  // occupied_[j]: waiting items inside R_j
  std::vector<Piece> pieces_;                       // by peer, then stream order
  std::vector<size_t> firstPiece_;                  // peer -> first piece (size_ + 1 entries)
  std::vector<std::vector<size_t>> insideRecv_;     // R_j -> its pieces, by buffer position
  std::vector<AuxBuffer> aux_;
  // The copy path (inplace_copy.h): blocks copied out at reset(), sent from here.
  std::vector<uint8_t> copied_;   // by peer
  std::vector<int64_t> copyAt_;   // by peer: first item in copy_
  std::vector<std::byte> copy_;
  // Inline blocks: sent with phase 0's control (never pieces here); received
  // ones count as staged until placed, from their control receive buffer.
  std::vector<uint8_t> inlineSend_, inlineRecv_;
  std::vector<int64_t> staged_;                 // by peer: items arrived or due inline, not placed
  std::vector<const std::byte*> stagedFrom_;    // by peer: where they wait (null before arrival)
  // Streams: chunk capacity and first item of each peer's slice in streamData_.
  std::vector<int64_t> streamItems_, streamAt_;
  std::vector<std::byte> streamData_;
};

}  // namespace ibdt::collectives
