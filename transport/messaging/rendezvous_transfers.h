// transport/messaging/rendezvous_transfers.h — what the rendezvous sender
// and receiver do alike with their transfers (by id) and per-peer work
// lists when asked about one peer.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "ibdt/status.h"
#include "transport/messaging/operation.h"

namespace ibdt::messaging {

template <class Transfer>
using TransfersById = std::unordered_map<uint32_t, std::unique_ptr<Transfer>>;

// Whether a transfer with `rank` is still going.
template <class Transfer>
bool anyTransferWith(const TransfersById<Transfer>& transfers, int rank) {
  return std::any_of(transfers.begin(), transfers.end(),
                     [rank](const auto& entry) { return entry.second->op->peer == rank; });
}

// Completes every transfer with `rank` with `failure` and drops its work list.
template <class Transfer>
void failTransfersWith(TransfersById<Transfer>& transfers, std::vector<std::deque<uint32_t>>& active, int rank,
                       const Status& failure) {
  if (static_cast<size_t>(rank) < active.size()) active[static_cast<size_t>(rank)].clear();
  std::erase_if(transfers, [&](auto& entry) {
    if (entry.second->op->peer != rank) return false;
    completeOperation(*entry.second->op, failure);
    return true;
  });
}

}  // namespace ibdt::messaging
