// transport/messaging/tuned_select.h — the decisions a loaded tuning file
// makes (tuning.h; API for other layers in docs/tuning.md). Each is a pure
// function of the file and the message's layouts, so it is deterministic
// given a file and the same on both sides of a transfer.
//
// Which decisions: the sender's pipelined eager vs rendezvous (instead of
// the IBDT_MSG_PIPELINE_LIMIT constant), its pack vs gather (BC-SPUP vs
// RWG-UP, instead of the micro-calibrated packBelowBlock) or Generic, and the
// receiver's unpack vs zero-copy reply (instead of the first-order estimate
// of cost_model.h). Each knob the user sets wins over the model.
#pragma once

#include "transport/messaging/cost_model.h"
#include "transport/messaging/tuning.h"

namespace ibdt::messaging {

// Predicted nanoseconds of `path` for a message whose sides have these
// layouts; +infinity for a path the file did not measure.
double tunedNs(const Tuning& tuning, TunedPath path, const SideLayout& sender, const SideLayout& receiver);

// The cheapest path for the message among those the protocol can take:
// pipelined eager only when `pipelinedAllowed`; P-RRS only with RDMA read.
TunedPath bestTunedPath(const Tuning& tuning, const SideLayout& sender, const SideLayout& receiver, bool rdmaRead,
                        bool pipelinedAllowed);

// The sender, which does not know the receiver's layout yet, assumes it is
// like its own (the common case: the same type on both sides).
bool tunedPrefersPipelined(const Tuning& tuning, const SideLayout& sender, bool rdmaRead);
// A rendezvous sender asks for Generic (tuning.h, TunedPath::kGeneric) in
// its RTS when that is the cheapest rendezvous scheme for its layout.
bool tunedPrefersGeneric(const Tuning& tuning, const SideLayout& sender, bool rdmaRead);
// The sender packs (BC-SPUP) rather than gathers (RWG-UP) when that is cheaper.
bool tunedWantsPack(const Tuning& tuning, const SideLayout& sender);
// The receiver, knowing both layouts, replies "unpack buffer" when the
// unpack scheme Table 1 then gives (BC-SPUP or RWG-UP, by the sender's
// wish) is cheaper than the zero-copy one (Multi-W, or P-RRS with RDMA read
// when the sender is contiguous).
bool tunedReceiverUnpacks(const Tuning& tuning, const SideLayout& sender, bool senderWantsPack,
                          const SideLayout& receiver, bool rdmaRead);

}  // namespace ibdt::messaging
