// transport/messaging/cost_model.h — how long each rendezvous scheme would
// take for one message, estimated from both sides' datatype statistics and
// the costs the provider measured (fabric::TransferCost) plus this core's
// memcpy rate. The receiver, which knows both layouts once the RTS arrived,
// compares the estimates to choose between its two replies of Table 1
// (unpack buffer or zero-copy); see scheme_select.h.
//
// The estimates are first-order sums, good enough to rank schemes:
//   Contig   one request per max message: perRequest + pages·perRemotePage + N/bw
//   Multi-W  one write per receiver block, posted in lists: perRequest per list,
//            perSge per block piece, perRemotePage per receiver page, N/bw
//   P-RRS    (sender packs N/memcpy first unless contiguous) one READ per
//            maxSge receiver blocks from the sender's buffer
//   RWG-UP   the sender gathers each segment into the receiver's staging buffer
//            (allocated memory), the receiver unpacks it: the two sides work
//            at once, so the slower side dominates and the faster side adds
//            only its last segment
//   BC-SPUP  as RWG-UP, but the sender packs before it writes (a copy more on
//            the sender when the provider copies with the sender's CPU)
//   Generic  pack all, write all, unpack all: the sum
#pragma once

#include <cstddef>
#include <cstdint>

#include "ibdt/datatype.h"
#include "ibdt/fabric.h"
#include "ibdt/messaging.h"

namespace ibdt::messaging {

struct CostModel {
  double memcpyBytesPerNs = 1;
  fabric::TransferCost transfer;
  bool rdmaRead = false;
  size_t pageSize = 4096;
  uint32_t maxSge = 1;
  uint32_t listLength = 1;  // writes posted per call (1 with list posting off)
  // Per-block work of the datatype engine (measured by measureBlockCosts):
  // listing a block as an iovec, packing one beyond its bytes, and the rate
  // at which it packs blocks the sender just touched (cache-warm).
  double iovecNsPerBlock = 0;
  double packNsPerBlock = 0;
  double packBytesPerNs = 1;

  // Mean block size below which the sender packs: copying a block costs
  // less than listing and gathering it as one more entry of a write into
  // the receiver's staging buffer.
  double packBelowBlock() const;
};

// One side of a message, as the cost model sees it.
struct SideLayout {
  int64_t bytes = 0;
  bool contiguous = false;
  int64_t blocks = 1;
  double meanBlock = 0;
};
SideLayout sideLayout(const datatype::Stats& stats);

// The block size from which one cross-process read (the provider's
// user-memory transfer cost) costs less than two copies through shared
// memory (into a segment and out of it, at this core's memcpy rate out of
// cache); 0: never (the read's per-byte cost is not below two copies').
// The provider's rate into its allocated memory would come from the same
// calibration as the read, but there the two rates are so close (6.5 and
// 6.4 B/ns on the EMR VM) that noise decided, and most runs said never
// where lending won by a third at 64 KiB.
int64_t singleCopyReadCrossover(const CostModel& model);

// Pipeline unit of the unpack schemes for a message of `bytes`: the
// configured size, or (configured == 0) a quarter of the message within
// [16 KiB, 64 KiB], so that even mid-sized messages overlap both sides.
int64_t segmentSizeFor(int64_t bytes, int64_t configured);

// Estimated nanoseconds for `scheme` to deliver the message.
double estimateNs(Scheme scheme, const SideLayout& sender, const SideLayout& receiver, const CostModel& model,
                  int64_t segmentSize);

// Times memcpy on this core (best of three 8 MiB copies, beyond the caches).
double measureMemcpyBytesPerNs();
// Sets iovecNsPerBlock and packNsPerBlock from a 4096-block vector of 8-byte
// blocks (small enough that the per-block work dominates), and
// packBytesPerNs from 128 blocks of 512 bytes packed twice in a row.
Status measureBlockCosts(CostModel& model);

}  // namespace ibdt::messaging
