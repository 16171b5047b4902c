// Who holds how many of the pooled eager buffers (eager_pool.h).
#include "transport/messaging/eager_pool.h"

#include <algorithm>

namespace ibdt::messaging {

void EagerPool::init(int ranks, uint32_t guaranteed, uint32_t ceiling, uint64_t extraSlots) {
  guaranteed_ = guaranteed;
  ceiling_ = ceiling;
  extraSlots_ = extraSlots;
  wanting_ = 0;
  peers_.assign(static_cast<size_t>(ranks), PeerShare{});
}

void EagerPool::open(int rank) {
  PeerShare& share = peer(rank);
  if (share.wants) --wanting_;
  share = PeerShare{};
  share.granted = guaranteed_;
}

void EagerPool::heard(int rank, bool wantsCredits) {
  PeerShare& share = peer(rank);
  share.reclaimAsked = false;  // it sent again: it may be asked again
  if (share.wants != wantsCredits) {
    share.wants = wantsCredits;
    if (wantsCredits)
      ++wanting_;
    else
      --wanting_;
  }
}

uint32_t EagerPool::fairShare() const {
  uint64_t share = guaranteed_ + extraSlots_ / std::max<uint32_t>(1, wanting_);
  return static_cast<uint32_t>(std::min<uint64_t>(share, ceiling_));
}

EagerPool::Decision EagerPool::decide(int rank, bool givenBack, uint64_t freeSlots) {
  asked_.clear();
  PeerShare& share = peer(rank);
  const bool aboveGuarantee = share.granted > guaranteed_;
  // Taken back: given back, no longer asked for while others ask, or more
  // than a fair share while others ask. Never below the guaranteed share.
  const bool othersAsk = wanting_ > (share.wants ? 1u : 0u);
  if (aboveGuarantee && (givenBack || (othersAsk && (!share.wants || share.granted > fairShare())))) {
    --share.granted;
    return {.retain = true};
  }
  if (!share.wants || givenBack) return {};
  // Asked for: double, within the ceiling and the fair share.
  uint32_t limit = std::max(share.granted, fairShare());
  uint32_t wanted = std::min({limit - share.granted, std::max<uint32_t>(1, share.granted)});
  uint32_t grant = static_cast<uint32_t>(std::min<uint64_t>(wanted, freeSlots));
  share.granted += grant;
  if (grant < wanted) askHolders(rank);
  return {.grant = grant};
}

void EagerPool::askHolders(int except) {
  for (size_t rank = 0; rank < peers_.size(); ++rank) {
    PeerShare& share = peers_[rank];
    if (static_cast<int>(rank) == except || share.wants || share.reclaimAsked || share.granted <= guaranteed_)
      continue;
    share.reclaimAsked = share.reclaimDue = true;
    asked_.push_back(static_cast<int>(rank));
  }
}

}  // namespace ibdt::messaging
