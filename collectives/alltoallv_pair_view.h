// collectives/alltoallv_pair_view.h — what a rank states about each pair of
// an alltoallv, both directions, so that the other side can check it:
// where its block for the peer lies in its row, and the bytes, signature
// hash and element count it sends and expects. The shared-segment
// alltoallv exchanges these at init; the mailbox writes them in every
// call's row header.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collectives/alltoallv_args.h"

namespace ibdt::collectives {

// kSendAddress: where the block lies in the writer's own buffer when the
// reader copies it from there (the call mailbox's single copy), else 0.
enum PairSlot : size_t {
  kSendAt, kSendBytes, kSendHash, kSendElements, kRecvBytes, kRecvHash, kRecvElements, kSendAddress, kPairSlots
};

// `view` (kPairSlots values) for `peer`, whose block lies at `sendAt` in our row.
void fillPairView(const AlltoallvArgs& args, int peer, int64_t sendAt, int64_t* view);

// Whether what `from` states it sends (`send`, from's view) differs from
// what `to` states it receives (`recv`, to's view); `why` says how.
Status pairMismatch(std::string_view what, int from, int to, const int64_t* send, const int64_t* recv);

}  // namespace ibdt::collectives
