#include "transport/messaging/scheme_select.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

namespace ibdt::messaging {

double CostModel::packBelowBlock() const { return transfer.perSgeNs * memcpyBytesPerNs; }

double CostModel::unpackBelowBlock() const {
  return (transfer.perRequestNs + transfer.perRemotePageNs) * memcpyBytesPerNs;
}

double measureMemcpyBytesPerNs() {
  // Larger than the caches: rendezvous messages are copied from memory, not L2.
  constexpr size_t kBytes = 8u << 20;
  std::vector<uint8_t> from(kBytes, 1), to(kBytes, 0);
  double best = 0;
  for (int i = 0; i < 3; ++i) {
    auto start = std::chrono::steady_clock::now();
    std::memcpy(to.data(), from.data(), kBytes);
    // Keep the copy from being optimised away.
    asm volatile("" : : "r"(to.data()) : "memory");
    double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    if (ns > 0) best = std::max(best, kBytes / ns);
  }
  return best > 0 ? best : 1;
}

bool senderWantsPack(const datatype::Stats& stats, double packBelowBlock) {
  return !stats.contiguous && stats.meanBlock < packBelowBlock;
}

bool receiverWantsUnpack(const datatype::Stats& stats, double unpackBelowBlock) {
  return !stats.contiguous && stats.meanBlock < unpackBelowBlock;
}

bool receiverUsesUnpack(Scheme forced, bool senderContiguous, const datatype::Stats& receiver,
                        double unpackBelowBlock) {
  if (senderContiguous && receiver.contiguous) return false;
  switch (forced) {
    case Scheme::kGeneric:
    case Scheme::kBcSpup:
    case Scheme::kRwgUp:
      return true;
    case Scheme::kMultiW:
    case Scheme::kPRrs:
      return false;
    default:
      return receiverWantsUnpack(receiver, unpackBelowBlock);
  }
}

Scheme finalScheme(Scheme forced, bool senderWantsPack, bool senderContiguous, bool receiverUnpacks,
                   Scheme receiverHint, bool receiverContiguous, bool rdmaRead) {
  if (senderContiguous && receiverContiguous) return Scheme::kContiguous;
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
