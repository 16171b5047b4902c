// collectives/inplace_copy.h — the in-place alltoallv's copy path
// (docs/alltoallv.md, "In-place: the copy path"): which outgoing blocks a
// rank copies out of its one buffer into its auxiliary memory before a run.
//
// A copied block leaves from the copy, so its slots in the buffer are free
// from the start; a receive block that then holds no waiting item takes the
// whole incoming block in place, straight into the user's buffer. A pair
// whose two ranks both take everything in place in phase 0 is exchanged
// whole in phase 0, like a pairwise exchange: no later control round trip.
// Each rank chooses alone from its own counts; the pair's verdict follows
// from the phase-0 control messages it exchanges anyway (each says what the
// rank takes), so both ranks of a pair agree without a vote.
#pragma once

#include <cstdint>
#include <vector>

namespace ibdt::collectives {

struct InPlaceCopyChoice {
  std::vector<uint8_t> copied;  // by peer (the rank's own block included)
  std::vector<int64_t> at;      // by peer: first item in the copy
  int64_t items = 0;            // items copied in all
  int64_t auxBytes = 0;         // left for the auxiliary buffers of the pairs that are not copied
};

// The rule, for `auxBytes` (a) of auxiliary memory: if all outgoing blocks
// fit a, all are copied and no auxiliary buffer is needed (nothing waits in
// the buffer, so every receive block is free); otherwise blocks are copied
// smallest first while they fit a / 2, the rest of a (at least one item)
// stays for the auxiliary buffers. The copy plus the buffers never exceed a.
InPlaceCopyChoice chooseInPlaceCopies(const std::vector<int64_t>& sendcounts, int64_t itemSize, int64_t auxBytes);

}  // namespace ibdt::collectives
