#include "transport/messaging/tuned_select.h"

#include <algorithm>
#include <initializer_list>
#include <limits>

namespace ibdt::messaging {
namespace {

constexpr double kUnmeasured = std::numeric_limits<double>::infinity();

// The blocks a message's cost scales with: the non-contiguous side's (the
// larger count when both are).
double chargedBlocks(const SideLayout& sender, const SideLayout& receiver) {
  double blocks = 0;
  if (!sender.contiguous) blocks = static_cast<double>(sender.blocks);
  if (!receiver.contiguous) blocks = std::max(blocks, static_cast<double>(receiver.blocks));
  return blocks;
}

TunedPath cheapest(const Tuning& tuning, std::initializer_list<TunedPath> candidates, const SideLayout& sender,
                   const SideLayout& receiver) {
  TunedPath best = *candidates.begin();
  double bestNs = kUnmeasured;
  for (TunedPath path : candidates) {  // ties keep the earlier candidate: deterministic
    double ns = tunedNs(tuning, path, sender, receiver);
    if (ns < bestNs) {
      best = path;
      bestNs = ns;
    }
  }
  return best;
}

}  // namespace

double tunedNs(const Tuning& tuning, TunedPath path, const SideLayout& sender, const SideLayout& receiver) {
  const PathCost& cost = tuning.cost(path);
  if (!cost.measured) return kUnmeasured;
  double bytes = static_cast<double>(std::min(sender.bytes, receiver.bytes));
  return std::max(0.0, cost.ns(bytes, chargedBlocks(sender, receiver)));
}

TunedPath bestTunedPath(const Tuning& tuning, const SideLayout& sender, const SideLayout& receiver, bool rdmaRead,
                        bool pipelinedAllowed) {
  using enum TunedPath;
  if (sender.contiguous && receiver.contiguous) {
    if (!pipelinedAllowed) return kContig;
    return cheapest(tuning, {kContig, kPipelinedContig}, sender, receiver);
  }
  // What Table 1 can reach: a contiguous sender never packs, and the
  // zero-copy reply gives P-RRS only to a contiguous sender that can be read.
  // Generic: a strided sender asks for it in its RTS (tunedPrefersGeneric).
  TunedPath rendezvous = !sender.contiguous ? cheapest(tuning, {kBcSpup, kRwgUp, kMultiW, kGeneric}, sender, receiver)
                         : rdmaRead         ? cheapest(tuning, {kRwgUp, kPRrs}, sender, receiver)
                                            : cheapest(tuning, {kRwgUp, kMultiW}, sender, receiver);
  if (!pipelinedAllowed) return rendezvous;
  TunedPath pipelined = sender.contiguous ? kPipelinedContig : kPipelined;
  return tunedNs(tuning, pipelined, sender, receiver) <= tunedNs(tuning, rendezvous, sender, receiver) ? pipelined
                                                                                                       : rendezvous;
}

bool tunedPrefersPipelined(const Tuning& tuning, const SideLayout& sender, bool rdmaRead) {
  TunedPath best = bestTunedPath(tuning, sender, sender, rdmaRead, true);
  return best == TunedPath::kPipelined || best == TunedPath::kPipelinedContig;
}

bool tunedPrefersGeneric(const Tuning& tuning, const SideLayout& sender, bool rdmaRead) {
  return bestTunedPath(tuning, sender, sender, rdmaRead, false) == TunedPath::kGeneric;
}

bool tunedWantsPack(const Tuning& tuning, const SideLayout& sender) {
  if (sender.contiguous) return false;
  return tunedNs(tuning, TunedPath::kBcSpup, sender, sender) < tunedNs(tuning, TunedPath::kRwgUp, sender, sender);
}

bool tunedReceiverUnpacks(const Tuning& tuning, const SideLayout& sender, bool senderWantsPack,
                          const SideLayout& receiver, bool rdmaRead) {
  TunedPath unpack = senderWantsPack ? TunedPath::kBcSpup : TunedPath::kRwgUp;
  TunedPath zeroCopy = sender.contiguous && rdmaRead ? TunedPath::kPRrs : TunedPath::kMultiW;
  if (sender.contiguous && receiver.contiguous) zeroCopy = TunedPath::kContig;
  return tunedNs(tuning, unpack, sender, receiver) < tunedNs(tuning, zeroCopy, sender, receiver);
}

}  // namespace ibdt::messaging
