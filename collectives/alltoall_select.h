// collectives/alltoall_select.h — what kAuto runs (docs/alltoall-selection.md).
//
// Each candidate (pairwise, the three radix-2 Bruck forms, radix-r Bruck
// for r in kAutoRadixes) is priced by the α-β model of the papers:
//     fixedNs + perMessageNs * messages + perByteNs * bytes
// where `messages` and `bytes` are what one rank sends in one call for p
// ranks and blocks of b bytes (computed exactly per algorithm), and the
// three coefficients per algorithm come from the tuning file ibdt-tune
// wrote on this machine (fitted to alltoalls it timed at 2..4 ranks), or
// from the built-in defaults without one. The cheapest wins; the choice is
// a pure function of (model, p, b), so every rank that loaded the same file
// chooses the same (alltoall.cc agrees across nodes, whose files may differ).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "ibdt/collectives.h"
#include "transport/messaging/tuning.h"

namespace ibdt::collectives {

// The radixes kAuto considers for bruck-radix (below p only: r >= p is one
// round of p - 1 messages, pairwise's schedule).
inline constexpr std::array<int64_t, 3> kAutoRadixes = {3, 4, 8};

// What one rank sends in one alltoall.
struct AlltoallVolume {
  double messages = 0;
  double bytes = 0;
};
// Bruck forms with radix 2 share one volume; `radix` only matters for kBruckRadix.
AlltoallVolume alltoallVolume(AlltoallAlgorithm algorithm, int64_t radix, int p, int64_t blockBytes);

// The tuning file's name of an algorithm's fit, e.g. "alltoall/bruck-modified".
std::string alltoallFitName(AlltoallAlgorithm algorithm);

// The algorithms ibdt-tune times, in tie-break order.
inline constexpr std::array<AlltoallAlgorithm, 5> kModelledAlltoalls = {
    AlltoallAlgorithm::kPairwise, AlltoallAlgorithm::kBruckModified, AlltoallAlgorithm::kBruckZeroCopy,
    AlltoallAlgorithm::kBruckBasic, AlltoallAlgorithm::kBruckRadix};
// The algorithms the model prices: those, then direct-write, whose init is
// collective (a candidate only where every rank builds the plan together,
// see selectAlltoall) and which ibdt-tune does not time yet (a file without
// its fit leaves it out; the built-in model has one).
inline constexpr std::array<AlltoallAlgorithm, 6> kPricedAlltoalls = {
    AlltoallAlgorithm::kPairwise,   AlltoallAlgorithm::kBruckModified, AlltoallAlgorithm::kBruckZeroCopy,
    AlltoallAlgorithm::kBruckBasic, AlltoallAlgorithm::kBruckRadix,    AlltoallAlgorithm::kDirectWrite};

class AlltoallCostModel {
 public:
  // The defaults fitted on the machine of docs/alltoall-selection.md.
  static AlltoallCostModel builtIn();
  // The file's fits when it has one for pairwise (an algorithm without a fit
  // is then not a candidate); else builtIn(). Null: builtIn().
  static AlltoallCostModel fromTuning(const messaging::Tuning* tuning);

  bool fromFile() const { return fromFile_; }
  bool has(AlltoallAlgorithm algorithm) const;
  // The algorithm's fit (null when the model lacks it), e.g. ibdt-sim's on-node cost.
  const messaging::CollectiveCost* cost(AlltoallAlgorithm algorithm) const {
    return has(algorithm) ? &costs_[slot(algorithm)] : nullptr;
  }
  // +infinity for an algorithm the model lacks.
  double predictNs(AlltoallAlgorithm algorithm, int64_t radix, int p, int64_t blockBytes) const;
  void set(AlltoallAlgorithm algorithm, const messaging::CollectiveCost& cost);

 private:
  static size_t slot(AlltoallAlgorithm algorithm);
  std::array<messaging::CollectiveCost, kPricedAlltoalls.size()> costs_{};
  std::array<bool, kPricedAlltoalls.size()> present_{};
  bool fromFile_ = false;
};

struct AlltoallChoice {
  AlltoallAlgorithm algorithm = AlltoallAlgorithm::kPairwise;
  int64_t radix = 2;  // kBruckRadix's r
  double predictedNs = 0;
  // Packs the choice in one integer (for the agreement across nodes) and back.
  int64_t code() const { return static_cast<int64_t>(algorithm) * 4096 + radix; }
  static AlltoallChoice fromCode(int64_t code);
};

// The cheapest candidate for p ranks and blocks of `blockBytes` (pairwise
// for p = 1 or empty blocks; at p = 2 pairwise or direct-write, as every
// Bruck form is pairwise's single exchange plus copies).
// `collectiveInit`: direct-write is a candidate too (only where every rank
// builds the plan together: a persistent init, not a per-call plan).
AlltoallChoice selectAlltoall(const AlltoallCostModel& model, int p, int64_t blockBytes, bool collectiveInit = true);

}  // namespace ibdt::collectives
