// transport/messaging/scheme_select.h — which rendezvous scheme a message
// uses: each side's wish, then the paper's Table 1 (Wu, Wyckoff, Panda,
// Section 5.2).
//
//   * The sender wants to pack when copying a block costs less than
//     gathering it as one more scatter/gather entry (CostModel::packBelowBlock).
//   * The receiver, holding both sides' statistics once the RTS arrived,
//     replies "unpack buffer" or "zero-copy", whichever makes Table 1's
//     resulting scheme cheaper by the cost model (cost_model.h). That may
//     mean a staging buffer even for contiguous data, where the provider's
//     zero-copy path costs more than a pipelined copy (shm: the kernel pins
//     every page of a cross-memory attach).
//   * The sender finalises by Table 1.
// Overrides: IBDT_MSG_PACK_BELOW, IBDT_MSG_UNPACK_BELOW (a plain per-block
// threshold instead of the model), and IBDT_MSG_SCHEME forces the scheme.
#pragma once

#include "ibdt/datatype.h"
#include "ibdt/fabric.h"
#include "ibdt/messaging.h"
#include "transport/messaging/cost_model.h"
#include "transport/messaging/tuning.h"

namespace ibdt::messaging {

// Sender's initial decision (Section 5.2, second step).
bool senderWantsPack(const datatype::Stats& stats, double packBelowBlock);
// The receiver's per-block rule when IBDT_MSG_UNPACK_BELOW overrides the model.
bool receiverWantsUnpack(const datatype::Stats& stats, double unpackBelowBlock);

// What the receiver needs to decide its reply.
struct ReplyInputs {
  Scheme forced = Scheme::kAuto;  // the scheme forced on either side
  SideLayout sender;              // from the RTS
  bool senderWantsPack = false;
  datatype::Stats receiver;
  double unpackBelowOverride = -1;  // >= 0: IBDT_MSG_UNPACK_BELOW
  int64_t segmentSize = 0;
  const Tuning* tuning = nullptr;   // a tuning file in force decides instead of `model`
};
// The receiver's reply mode: unpack buffer (true) or zero-copy (false).
bool receiverUsesUnpack(const ReplyInputs& inputs, const CostModel& model);

// Table 1: the sender's final decision once the reply arrived.
//   pack      + unpack    -> BC-SPUP
//   zero-copy + unpack    -> RWG-UP
//   any       + zero-copy -> Multi-W (P-RRS when the sender is contiguous and
//                            the provider reads: the receiver scatters with
//                            one READ per max_sge blocks, nothing is packed)
// Both sides contiguous and zero-copy -> kContiguous. A forced scheme wins
// when it fits the receiver's mode; otherwise the mode's Table 1 choice is used.
Scheme finalScheme(Scheme forced, bool senderWantsPack, bool senderContiguous, bool receiverUnpacks,
                   Scheme receiverHint, bool receiverContiguous, bool rdmaRead);

}  // namespace ibdt::messaging
