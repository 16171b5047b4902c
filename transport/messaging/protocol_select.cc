// The protocol selector (protocol_select.h): the cost model measured at
// create(), the tuning file loaded, and the per-message decisions the user
// did not force.
#include "transport/messaging/protocol_select.h"

#include <algorithm>

#include "base/log.h"
#include "transport/messaging/tuned_select.h"
#include "transport/messaging/tuning_decisions.h"

namespace ibdt::messaging {

Status ProtocolSelector::init(const fabric::Caps& caps, uint32_t maxSge, uint32_t listLength) {
  cost_.memcpyBytesPerNs = measureMemcpyBytesPerNs();
  cost_.transfer = caps.transfer;
  cost_.rdmaRead = caps.rdmaRead;
  cost_.pageSize = caps.pageSize;
  cost_.maxSge = maxSge;
  cost_.listLength = listLength;
  IBDT_RETURN_IF_ERROR(measureBlockCosts(cost_));
  packBelow_ = options_.packBelowBlock >= 0 ? options_.packBelowBlock : cost_.packBelowBlock();
  unpackBelow_ = options_.unpackBelowBlock >= 0 ? options_.unpackBelowBlock : -1;
  singleCopyReadMin_ = options_.singleCopyReadMin >= 0 ? options_.singleCopyReadMin : singleCopyReadCrossover(cost_);
  loadTuning(caps);
  IBDT_LOG(kDebug, "messaging: memcpy ", cost_.memcpyBytesPerNs, " B/ns; per block ", cost_.iovecNsPerBlock,
           " ns to list, ", cost_.packNsPerBlock, " ns to pack (warm at ", cost_.packBytesPerNs, " B/ns); pack below ",
           packBelow_, " B blocks; single-copy reads from ", singleCopyReadMin_, " B; receiver ",
           unpackBelow_ >= 0 ? strCat("unpacks below ", unpackBelow_, " B blocks")
                             : std::string("compares the schemes per message"));
  return Status::ok();
}

void ProtocolSelector::loadTuning(const fabric::Caps& caps) {
  tuning_ = messaging::loadTuning(options_.tuneFile, currentHostKey(caps.provider));
  const Tuning* tuned = tuning();
  tunedPipeline_ = tuned != nullptr && !options_.pipelineLimitForced && options_.forcedScheme == Scheme::kAuto;
  tunedPack_ = tuned != nullptr && options_.packBelowBlock < 0;
  if (tunedPipeline_) {
    // The file decides up to the largest size it measured (beyond, its fits
    // would extrapolate) and up to half the peer's eager credits: a larger
    // message waits mid-way for credits, i.e. for the peer's core
    // (docs/tuning.md).
    int64_t creditWindow = static_cast<int64_t>(options_.eagerCredits) * options_.eagerLimit / 2;
    options_.pipelineLimit = std::min(tuned->maxBytes, creditWindow);
  }
  if (tuned != nullptr && !options_.exchangeZeroCopyForced) {
    options_.exchangeZeroCopyMin = tunedExchangeZeroCopyMin(*tuned, options_.eagerLimit, options_.exchangeZeroCopyMin);
  }
  IBDT_LOG(kDebug, "messaging: tuning ", tuning_.note);
}

SendPath ProtocolSelector::sendPath(Operation& op, TypeCache& types) const {
  if (op.bytes <= options_.eagerLimit) return SendPath::kEager;
  return usePipelined(op, types) ? SendPath::kPipelined : SendPath::kRendezvous;
}

bool ProtocolSelector::usePipelined(Operation& op, TypeCache& types) const {
  if (op.bytes > options_.pipelineLimit || options_.forcedScheme != Scheme::kAuto) return false;
  if (exchangeSingleCopy(op.communicator, op.bytes) && op.type.contiguous()) return false;
  if (!tunedPipeline_) return true;
  if (!op.ensureStats(types).isOk()) return true;  // the rendezvous path reports the error
  return tunedPrefersPipelined(*tuning(), sideLayout(op.stats), cost_.rdmaRead);
}

bool ProtocolSelector::rendezvousPacks(const datatype::Stats& stats) const {
  if (!tunedPack_) return senderWantsPack(stats, packBelow_);
  return tunedWantsPack(*tuning(), sideLayout(stats));
}

Scheme ProtocolSelector::requestedScheme(const datatype::Stats& stats) const {
  if (options_.forcedScheme != Scheme::kAuto || !tunedPack_ || stats.contiguous) return options_.forcedScheme;
  return tunedPrefersGeneric(*tuning(), sideLayout(stats), cost_.rdmaRead) ? Scheme::kGeneric : Scheme::kAuto;
}

bool ProtocolSelector::replyUnpacks(const wire::Envelope& envelope, const wire::Rts& rts,
                                    const datatype::Stats& receiver, Scheme forced, int64_t bytes,
                                    int64_t segmentSize) const {
  // Exchange traffic: both cores are busy sending and receiving, so the
  // staged path's overlap is gone and one copy beats two (messaging.h).
  if (rts.senderContiguous != 0 && receiver.contiguous && exchangeSingleCopy(envelope.communicator, bytes)) {
    return false;
  }
  ReplyInputs inputs;
  inputs.forced = forced;
  inputs.sender =
      SideLayout{envelope.bytes, rts.senderContiguous != 0, std::max<int64_t>(1, rts.blockCount), rts.meanBlock};
  inputs.senderWantsPack = rts.senderWantsPack != 0;
  inputs.receiver = receiver;
  inputs.unpackBelowOverride = unpackBelow_;
  inputs.tuning = tuning();
  inputs.segmentSize = segmentSize;
  return receiverUsesUnpack(inputs, cost_);
}

SendChoice ProtocolSelector::sendProtocol(bool senderWantsPack, const datatype::Stats& sender,
                                          const wire::Cts& cts) const {
  SendChoice choice;
  choice.scheme = finalScheme(options_.forcedScheme, senderWantsPack, sender.contiguous,
                              cts.mode == wire::ReplyMode::kUnpack, static_cast<Scheme>(cts.scheme),
                              cts.receiverContiguous != 0);
  switch (choice.scheme) {
    case Scheme::kGeneric:
      choice.protocol = makePackedCopySend();
      break;
    case Scheme::kBcSpup:
      choice.protocol = makeSegmentPackSend();
      break;
    case Scheme::kMultiW:
      choice.protocol = makeMultiWriteSend();
      break;
    case Scheme::kPRrs:
      choice.protocol = makeOfferReadSend();
      break;
    default:  // kRwgUp, kContiguous
      choice.protocol = makeGatherSend();
      break;
  }
  return choice;
}

// Both sides copy at about the same rate, so the message takes one side's
// copy plus a fragment. Each fragment costs a request, a completion and a
// receive repost on top of its bytes, so a message goes in four fragments
// of at least 8 KiB and at most an eager buffer (on shm this beats halving
// and uniform 8 KiB schedules at 64-256 KiB; docs/design.md).
int64_t ProtocolSelector::fragmentSize(int64_t bytes) const {
  constexpr int64_t kMinFragment = 8192;
  constexpr int64_t kFragmentsPerMessage = 4;
  int64_t limit = std::max<int64_t>(1, options_.eagerLimit);
  if (options_.segmentSize > 0) return std::min(options_.segmentSize, limit);
  int64_t quarter = (bytes + kFragmentsPerMessage - 1) / kFragmentsPerMessage;
  return std::min(limit, std::max(kMinFragment, quarter));
}

}  // namespace ibdt::messaging
