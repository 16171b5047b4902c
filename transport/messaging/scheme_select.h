// transport/messaging/scheme_select.h — which rendezvous scheme a message
// uses: each side's initial wish from its datatype statistics, then the
// paper's Table 1 (Wu, Wyckoff, Panda, Section 5.2).
//
// The thresholds come from a cost model with measured parameters:
//   * a sender packs when copying a block costs less than gathering it as
//     one more scatter/gather entry: meanBlock / memcpy < perSgeNs;
//   * a receiver unpacks when copying a block costs less than the sender
//     writing it as its own request into a (likely distinct) page:
//     meanBlock / memcpy < perRequestNs + perRemotePageNs.
// Either threshold can be overridden (IBDT_MSG_PACK_BELOW,
// IBDT_MSG_UNPACK_BELOW), and the whole choice forced (IBDT_MSG_SCHEME).
#pragma once

#include "ibdt/datatype.h"
#include "ibdt/fabric.h"
#include "ibdt/messaging.h"

namespace ibdt::messaging {

struct CostModel {
  double memcpyBytesPerNs = 1;
  fabric::TransferCost transfer;
  bool rdmaRead = false;

  // Mean block sizes below which the sender packs / the receiver unpacks.
  double packBelowBlock() const;
  double unpackBelowBlock() const;
};

// Times memcpy on this core (best of three 8 MiB copies, beyond the caches).
double measureMemcpyBytesPerNs();

struct SideView {
  bool contiguous = false;
  double meanBlock = 0;
  bool wantsCopy = false;  // sender: pack; receiver: unpack
};

// Sender's initial decision (Section 5.2, second step).
bool senderWantsPack(const datatype::Stats& stats, double packBelowBlock);
// Receiver's decision: unpack (true) or zero-copy into its user blocks.
bool receiverWantsUnpack(const datatype::Stats& stats, double unpackBelowBlock);

// The receiver's reply mode for a forced scheme, or from its wish under kAuto.
bool receiverUsesUnpack(Scheme forced, bool senderContiguous, const datatype::Stats& receiver,
                        double unpackBelowBlock);

// Table 1: the sender's final decision once the reply arrived.
//   pack      + unpack    -> BC-SPUP
//   zero-copy + unpack    -> RWG-UP
//   any       + zero-copy -> Multi-W (P-RRS when the sender is contiguous and
//                            the provider reads: the receiver scatters with
//                            one READ per max_sge blocks, nothing is packed)
// Both sides contiguous -> kContiguous. A forced scheme wins when it fits the
// receiver's mode; otherwise the mode's Table 1 choice is used.
Scheme finalScheme(Scheme forced, bool senderWantsPack, bool senderContiguous, bool receiverUnpacks,
                   Scheme receiverHint, bool receiverContiguous, bool rdmaRead);

}  // namespace ibdt::messaging
