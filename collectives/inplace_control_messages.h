// collectives/inplace_control_messages.h — the in-place alltoallv's control
// messages, and the small blocks that ride inside phase 0's
// (docs/alltoallv.md, "In-place: small blocks inside the control message").
//
// A block of at most kInPlaceInlineBytes to another rank is not sent as data
// at all: the sender copies it into its phase-0 control message to that
// peer before anything moves in the buffer, and the receiver places it from
// its phase-0 receive buffer. A pair whose blocks are both inline is
// exchanged in one message each way, where the phases need two rounds
// (control, then data). Both ranks decide from the pair's count alone (the
// sender's sendcount, the receiver's recvcount), which the pair check in
// the same message compares: if they differ the message is shorter or
// longer than the receive, and the pair check fails on both ranks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "collectives/inplace_elements.h"

namespace ibdt::collectives {

// Largest block (bytes) carried inside a control message: O(1) per peer,
// so the payloads add at most 2 (p - 1) x 256 B to the bookkeeping; when a
// is larger they come out of a (inplace_index_sets.cc).
constexpr int64_t kInPlaceInlineBytes = 256;

inline bool inPlaceInline(int64_t count, int64_t itemSize) {
  return count > 0 && count * itemSize <= kInPlaceInlineBytes;
}

class InPlaceControlMessages {
 public:
  // `headerWords` int64 per message, then (phase 0) the block if inline.
  InPlaceControlMessages(int rank, size_t headerWords, const std::vector<int64_t>& sendcounts,
                         const std::vector<int64_t>& recvcounts, int64_t itemSize);

  int64_t* out(int peer) { return out_.data() + outAt_[index(peer)]; }
  int64_t* in(int peer) { return in_.data() + inAt_[index(peer)]; }
  // Words of the phase-0 message to / from `peer` (header and payload).
  int64_t outWords(int peer) const { return outAt_[index(peer) + 1] - outAt_[index(peer)]; }
  int64_t inWords(int peer) const { return inAt_[index(peer) + 1] - inAt_[index(peer)]; }
  bool sendsInline(int peer) const { return outWords(peer) > static_cast<int64_t>(header_); }
  bool receivesInline(int peer) const { return inWords(peer) > static_cast<int64_t>(header_); }
  const std::byte* inPayload(int peer) { return reinterpret_cast<const std::byte*>(in(peer) + header_); }

  // Packs the inline blocks out of the buffer into their messages; before
  // anything in the buffer moves or is received.
  void pack(std::byte* base, const std::vector<int64_t>& sdispls, const InPlaceElements& elements);
  int64_t bytes() const { return static_cast<int64_t>((out_.capacity() + in_.capacity()) * sizeof(int64_t)); }

 private:
  static size_t index(int peer) { return static_cast<size_t>(peer); }

  size_t header_;
  std::vector<int64_t> sendcounts_;
  std::vector<int64_t> outAt_, inAt_;  // by peer, size p + 1: first word of its message
  std::vector<int64_t> out_, in_;
};

}  // namespace ibdt::collectives
