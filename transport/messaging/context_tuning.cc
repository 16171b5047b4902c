// The Context's side of the measured cost model (tuning.h, tuned_select.h):
// load the per-host file at create(), and let it take the per-message
// decisions the user did not force.
#include <algorithm>

#include "base/log.h"
#include "transport/messaging/context_impl.h"
#include "transport/messaging/tuned_select.h"

namespace ibdt::messaging {

void ContextImpl::loadTuning(const fabric::Caps& caps) {
  tuning_ = messaging::loadTuning(options_.tuneFile, currentHostKey(caps.provider));
  const Tuning* tuned = tuning();
  tunedPipeline_ = tuned != nullptr && !options_.pipelineLimitForced && options_.forcedScheme == Scheme::kAuto;
  tunedPack_ = tuned != nullptr && options_.packBelowBlock < 0;
  if (tunedPipeline_) {
    // The file decides up to the largest size it measured; beyond that its
    // fits would extrapolate, so larger messages rendezvous as before.
    options_.pipelineLimit = std::max(options_.pipelineLimit, tuned->maxBytes);
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
