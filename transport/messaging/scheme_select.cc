#include "transport/messaging/scheme_select.h"

#include "transport/messaging/tuned_select.h"

namespace ibdt::messaging {

bool senderWantsPack(const datatype::Stats& stats, double packBelowBlock) {
  return !stats.contiguous && stats.meanBlock < packBelowBlock;
}

bool receiverWantsUnpack(const datatype::Stats& stats, double unpackBelowBlock) {
  return !stats.contiguous && stats.meanBlock < unpackBelowBlock;
}

bool receiverUsesUnpack(const ReplyInputs& in, const CostModel& model) {
  bool bothContiguous = in.sender.contiguous && in.receiver.contiguous;
  switch (in.forced) {
    case Scheme::kGeneric:
    case Scheme::kBcSpup:
    case Scheme::kRwgUp:
      return !bothContiguous;
    case Scheme::kMultiW:
    case Scheme::kPRrs:
    case Scheme::kContiguous:
      return false;
    default:
      break;
  }
  if (in.unpackBelowOverride >= 0) return receiverWantsUnpack(in.receiver, in.unpackBelowOverride);
  SideLayout receiver = sideLayout(in.receiver);
  if (in.tuning != nullptr) {
    return tunedReceiverUnpacks(*in.tuning, in.sender, in.senderWantsPack, receiver, model.rdmaRead);
  }
  auto cost = [&](bool unpack) {
    Scheme scheme = finalScheme(Scheme::kAuto, in.senderWantsPack, in.sender.contiguous, unpack, Scheme::kAuto,
                                in.receiver.contiguous, model.rdmaRead);
    return estimateNs(scheme, in.sender, receiver, model, in.segmentSize);
  };
  return cost(true) < cost(false);
}

Scheme finalScheme(Scheme forced, bool senderWantsPack, bool senderContiguous, bool receiverUnpacks,
                   Scheme receiverHint, bool receiverContiguous, bool rdmaRead) {
  if (senderContiguous && receiverContiguous && !receiverUnpacks) return Scheme::kContiguous;
  if (forced == Scheme::kAuto) forced = receiverHint;
  if (receiverUnpacks) {
    if (forced == Scheme::kGeneric || forced == Scheme::kBcSpup || forced == Scheme::kRwgUp) return forced;
    return senderWantsPack ? Scheme::kBcSpup : Scheme::kRwgUp;
  }
  if (forced == Scheme::kMultiW) return Scheme::kMultiW;
  if (forced == Scheme::kPRrs && rdmaRead) return Scheme::kPRrs;
  return senderContiguous && rdmaRead ? Scheme::kPRrs : Scheme::kMultiW;
}

}  // namespace ibdt::messaging
