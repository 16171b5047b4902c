// The Context's side of the measured cost model (tuning.h, tuned_select.h):
// load the per-host file at create(), and let it take the per-message
// decisions the user did not force.
#include <algorithm>

#include "base/log.h"
#include "transport/messaging/context_impl.h"
#include "transport/messaging/tuned_select.h"
#include "transport/messaging/tuning_decisions.h"

namespace ibdt::messaging {

void ContextImpl::loadTuning(const fabric::Caps& caps) {
  tuning_ = messaging::loadTuning(options_.tuneFile, currentHostKey(caps.provider));
  const Tuning* tuned = tuning();
  tunedPipeline_ = tuned != nullptr && !options_.pipelineLimitForced && options_.forcedScheme == Scheme::kAuto;
  tunedPack_ = tuned != nullptr && options_.packBelowBlock < 0;
  if (tunedPipeline_) {
    // The file decides up to the largest size it measured (beyond, its fits
    // would extrapolate) and up to half the peer's eager credits: a larger
    // message waits mid-way for credits, i.e. for the peer's core, and on a
    // loaded 2-core machine 1 MiB (all 32 credits) took 6x its median at
    // times (docs/tuning.md).
    int64_t creditWindow = static_cast<int64_t>(options_.eagerCredits) * options_.eagerLimit / 2;
    options_.pipelineLimit = std::min(tuned->maxBytes, creditWindow);
  }
  if (tuned != nullptr && !options_.exchangeZeroCopyForced) {
    options_.exchangeZeroCopyMin = tunedExchangeZeroCopyMin(*tuned, options_.eagerLimit, options_.exchangeZeroCopyMin);
  }
  IBDT_LOG(kDebug, "messaging: tuning ", tuning_.note);
}

bool ContextImpl::usePipelined(Operation& op) {
  if (op.bytes > options_.pipelineLimit || options_.forcedScheme != Scheme::kAuto) return false;
  if (exchangeSingleCopy(op.communicator, op.bytes) && op.type.contiguous()) return false;
  if (!tunedPipeline_) return true;
  if (!op.ensureStats(types_).isOk()) return true;  // the rendezvous path reports the error
  return tunedPrefersPipelined(*tuning(), sideLayout(op.stats), cost_.rdmaRead);
}

bool ContextImpl::rendezvousWantsPack(const Operation& op) const {
  if (!tunedPack_) return senderWantsPack(op.stats, packBelow_);
  return tunedWantsPack(*tuning(), sideLayout(op.stats));
}

}  // namespace ibdt::messaging
