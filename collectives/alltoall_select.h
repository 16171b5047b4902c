// collectives/alltoall_select.h — what kAuto runs (docs/alltoall-selection.md).
//
// Each candidate (pairwise, the three radix-2 Bruck forms, radix-r Bruck
// for r in kAutoRadixes) is priced by the α-β model of the papers:
//     fixedNs + perMessageNs * messages + perByteNs * bytes
// where `messages` and `bytes` are what one rank sends in one call for p
// ranks and blocks of b bytes (computed exactly per algorithm), and the
// three coefficients per algorithm come from the tuning file ibdt-tune
// wrote on this machine (fitted to alltoalls it timed at 2..8 ranks), or
// from the built-in defaults without one. Where the file has the timings
// themselves (format_version 3) they price the algorithm at the ranks and
// sizes they cover instead of the fit; beyond them, ibdt-sim's predictions
// in the same file (alltoall_rules.h) do, before the fit. The cheapest wins; the choice is
// a pure function of (model, p, b), so every rank that loaded the same file
// chooses the same (alltoall.cc agrees across nodes, whose files may differ).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "collectives/alltoall_rules.h"
#include "ibdt/collectives.h"
#include "transport/messaging/tuning.h"

namespace ibdt::collectives {

// The radix ibdt-tune times bruck-radix at: 3 gives 2 and 1 rounds of 2
// messages at p = 4 and 3 (radix 4 would be pairwise's one round of p - 1).
// Its samples price this radix only; the others use the fit.
inline constexpr int64_t kTunedRadix = 3;
// Where the samples price pairwise, another algorithm replaces it only when
// it measured at least this fraction below it: within the 10 % the choice
// aims for, pairwise (no copies, no round waiting for its partner) stays, so
// a sample's noise does not flip the choice to a form that is no faster.
inline constexpr double kSampledMargin = 0.10;

// ibdt-tune times every algorithm with its ranks on this many simulated
// nodes in blocks (ibdt-run --nodes 2's map). Only the hierarchical alltoall
// depends on the node map: its samples price it on this many nodes only (as
// bruck-radix's price kTunedRadix only); elsewhere its fit extrapolates.
inline constexpr int kTunedNodes = 2;

// The radixes kAuto considers for bruck-radix (below p only: r >= p is one
// round of p - 1 messages, pairwise's schedule).
inline constexpr std::array<int64_t, 3> kAutoRadixes = {3, 4, 8};

// What one rank sends in one alltoall, and in how many steps that must
// follow one another (Bruck's rounds; pairwise's windows of the default
// throttle; 1 when every message is in flight at once).
struct AlltoallVolume {
  double messages = 0;
  double bytes = 0;
  double rounds = 0;
  // The rounds that cross between nodes: all of them, except the
  // hierarchical alltoall's gather and scatter (its leaders' exchange only).
  double networkRounds = 0;
};

// Between nodes, a round costs a network latency once, however many of its
// messages overlap (radix-r Bruck's r - 1, pairwise's window): the fits'
// per-message term is the rank's own work, measured on one node where the
// latency is ~0, and it stays per message. The built-in value is the
// one-way latency of a small message on ibdt-sim's default fat tree
// (docs/simulator.md: 250 ns per hop, 2 to 4 hops, SimGrid's LV08 factor
// 13.01), with which the model reproduces the simulator's choice at 64 to
// 1024 ranks (docs/alltoall-selection.md, "Across nodes").
inline constexpr double kBuiltInNetworkRoundNs = 7000;
// Bruck forms with radix 2 share one volume; `radix` only matters for
// kBruckRadix, `nodes` for kHierarchical: its leader's messages (the
// critical path) with the p ranks in blocks of ceil(p / nodes) per node,
// one leader per node, exchanging directly, or, `relay`, its one-sided form
// (the plan where a chunk takes the rendezvous: a leader writes fewer bytes
// in more messages, and readies and relays cross between nodes, 2 rounds).
AlltoallVolume alltoallVolume(AlltoallAlgorithm algorithm, int64_t radix, int p, int64_t blockBytes, int nodes = 1,
                              bool relay = false);

// The messaging layer's default single-copy threshold (Options::
// exchangeZeroCopyMin, IBDT_MSG_EXCHANGE_ZERO_COPY): from this chunk size
// the hierarchical plan is the relay, where the model has no Context.
inline constexpr int64_t kBuiltInSingleCopyFrom = 64 * 1024;

// The tuning file's name of an algorithm's fit, e.g. "alltoall/bruck-modified".
std::string alltoallFitName(AlltoallAlgorithm algorithm);

// The algorithms the model prices and ibdt-tune times, in tie-break order.
// Direct-write's init is collective (the keys): a candidate only where every
// rank builds the plan together (see selectAlltoall), and so is the
// hierarchical alltoall's, which is a candidate on several nodes only; the
// shared-memory alltoall's too (the segment), a candidate on one node only.
inline constexpr std::array<AlltoallAlgorithm, 8> kPricedAlltoalls = {
    AlltoallAlgorithm::kPairwise,     AlltoallAlgorithm::kBruckModified, AlltoallAlgorithm::kBruckZeroCopy,
    AlltoallAlgorithm::kBruckBasic,   AlltoallAlgorithm::kBruckRadix,    AlltoallAlgorithm::kDirectWrite,
    AlltoallAlgorithm::kHierarchical, AlltoallAlgorithm::kSharedMemory};
// kAuto leaves the shared-memory alltoall out where its segment (shared by
// the node's ranks: twice all their send blocks) would exceed this; 32
// ranks of 64 KiB blocks (128 MiB) still take it.
inline constexpr int64_t kAutoSharedMemoryMaxBytes = int64_t{256} << 20;
inline constexpr const auto& kModelledAlltoalls = kPricedAlltoalls;

// The tuning file's name of an algorithm's plan-creation fit (init and
// destroy, no run), e.g. "alltoall-init/direct-write": what a plan per call
// pays on top of its run.
std::string alltoallInitFitName(AlltoallAlgorithm algorithm);

class AlltoallCostModel {
 public:
  // The defaults fitted on the machine of docs/alltoall-selection.md.
  static AlltoallCostModel builtIn();
  // The file's fits when it has one for pairwise (an algorithm without a fit
  // is then not a candidate), and its rules (alltoall_rules.h; a bad rule
  // leaves them all out, with a warning); else builtIn(). Null: builtIn().
  static AlltoallCostModel fromTuning(const messaging::Tuning* tuning);

  bool fromFile() const { return fromFile_; }
  bool has(AlltoallAlgorithm algorithm) const;
  // The algorithm's fit (null when the model lacks it), e.g. ibdt-sim's on-node cost.
  const messaging::CollectiveCost* cost(AlltoallAlgorithm algorithm) const {
    return has(algorithm) ? &costs_[slot(algorithm)] : nullptr;
  }
  // +infinity for an algorithm the model lacks. Priced by the algorithm's
  // samples where they cover (p, blockBytes) (sampledNs; the hierarchical
  // alltoall's on kTunedNodes nodes only), else by its rule's predictions
  // where they cover it (the simulated platform's network included), else by
  // its fit. Beyond the largest rank count its samples cover at this block
  // size, the fit is anchored there: the sample times the fit's growth from
  // that rank count (anchoredNs). `nodes` > 1: every round between nodes
  // also pays networkRoundNs(), except when a rule priced it.
  double predictNs(AlltoallAlgorithm algorithm, int64_t radix, int p, int64_t blockBytes, int nodes = 1) const;
  // Whether predictNs comes from the samples at (p, blockBytes, nodes).
  bool sampled(AlltoallAlgorithm algorithm, int64_t radix, int p, int64_t blockBytes, int nodes = 1) const;
  // The variant's rule prediction at (p, blockBytes), interpolated between
  // block sizes as sampledNs does and between simulated rank counts
  // (rulePredictionNs); none where no rule covers it.
  // The hierarchical alltoall's rule is the one of ceil(p / nodes) ranks per
  // node, on several nodes only.
  std::optional<double> simulatedNs(AlltoallAlgorithm algorithm, int64_t radix, int p, int64_t blockBytes,
                                    int nodes = 1) const;
  // Whether some rule covers (p, blockBytes) on `nodes` nodes.
  bool simulatedAt(int p, int64_t blockBytes, int nodes = 1) const;
  void setRules(std::vector<AlltoallRule> rules) { rules_ = std::move(rules); }
  void set(AlltoallAlgorithm algorithm, const messaging::CollectiveCost& cost);
  // The timings the fit was made from (format_version 3 files).
  void setSamples(AlltoallAlgorithm algorithm, std::vector<messaging::CollectiveSample> samples);
  void setInitSamples(AlltoallAlgorithm algorithm, std::vector<messaging::CollectiveSample> samples);
  // Plan creation (init + destroy) by the same expression; measured by
  // ibdt-tune, absent from the built-in model.
  bool hasInit(AlltoallAlgorithm algorithm) const;
  // 0 for an algorithm without an init fit.
  double predictInitNs(AlltoallAlgorithm algorithm, int64_t radix, int p, int64_t blockBytes, int nodes = 1) const;
  void setInit(AlltoallAlgorithm algorithm, const messaging::CollectiveCost& cost);
  double networkRoundNs() const { return networkRoundNs_; }
  void setNetworkRoundNs(double ns) { networkRoundNs_ = ns; }
  // Whether the hierarchical plan whose members' chunks are `chunkBytes`
  // (blockBytes * p, one leader) is the relay: the agreement's vote, i.e.
  // the Context's Context::exchangeSingleCopy, which kAuto passes in; by
  // default from kBuiltInSingleCopyFrom.
  bool relays(int64_t chunkBytes) const {
    return relayed_ ? relayed_(chunkBytes) : chunkBytes >= kBuiltInSingleCopyFrom;
  }
  void setRelayed(std::function<bool(int64_t)> relayed) { relayed_ = std::move(relayed); }

 private:
  static size_t slot(AlltoallAlgorithm algorithm);
  // The sample at the largest timed rank count below p, scaled by the fit's
  // ratio between p and there: a fit of timings at 2..8 ranks misplaces its
  // level at 8 by up to a half (on a machine whose ranks outnumber its cores
  // the growth with p is not the model's), and beyond 8 that error would
  // decide the choice; the anchor keeps the level measured and takes only
  // the shape from the fit (docs/alltoall-selection.md). bruck-radix of any
  // radix anchors on kTunedRadix's time and volume there.
  std::optional<double> anchoredNs(AlltoallAlgorithm algorithm, int64_t radix, int p, int64_t blockBytes,
                                   int nodes, double fitNs) const;
  std::array<messaging::CollectiveCost, kPricedAlltoalls.size()> costs_{};
  std::array<bool, kPricedAlltoalls.size()> present_{};
  std::array<messaging::CollectiveCost, kPricedAlltoalls.size()> initCosts_{};
  std::array<bool, kPricedAlltoalls.size()> initPresent_{};
  std::array<std::vector<messaging::CollectiveSample>, kPricedAlltoalls.size()> samples_{};
  std::array<std::vector<messaging::CollectiveSample>, kPricedAlltoalls.size()> initSamples_{};
  std::vector<AlltoallRule> rules_;
  bool fromFile_ = false;
  double networkRoundNs_ = kBuiltInNetworkRoundNs;
  std::function<bool(int64_t)> relayed_;
  AlltoallVolume volumeOf(AlltoallAlgorithm algorithm, int64_t radix, int p, int64_t blockBytes, int nodes) const;
};

struct AlltoallChoice {
  AlltoallAlgorithm algorithm = AlltoallAlgorithm::kPairwise;
  int64_t radix = 2;  // kBruckRadix's r
  double predictedNs = 0;
  // Packs the choice in one integer (for the agreement across nodes) and back.
  int64_t code() const { return static_cast<int64_t>(algorithm) * 4096 + radix; }
  static AlltoallChoice fromCode(int64_t code);
  // "bruck-radix-<r>" for kBruckRadix, else the algorithm's name: what the
  // simulator prints and the tuning file's rules are named by.
  std::string name() const;
};

// The time `samples` give for p ranks and blocks of `blockBytes`: the
// sample itself at a timed size, interpolated log-log (a power law) between
// the two timed sizes around it at the same p; nothing outside the sizes
// timed at p, at a p not timed, or for empty blocks.
std::optional<double> sampledNs(const std::vector<messaging::CollectiveSample>& samples, int p, int64_t blockBytes);

// The cheapest candidate for p ranks and blocks of `blockBytes` (pairwise
// for p = 1 or empty blocks; at p = 2 pairwise or direct-write, as every
// Bruck form is pairwise's single exchange plus copies).
// `collectiveInit`: every rank builds this plan together (a persistent init
// or the blocking call, not a build under a pinned tag), so direct-write,
// whose init exchanges keys, is a candidate.
// `nodes`: how many nodes the p ranks span (rounds between nodes cost a
// network latency each). The hierarchical alltoall is a candidate where the
// ranks span several nodes with several ranks on some node (p > nodes) in a
// collective init (its init is an allgather); it is priced with the ranks in
// blocks of ceil(p / nodes), so every rank prices the same shape.
// `inPlace`: the receive buffer is the send buffer, which direct-write refuses.
// Where pairwise's price is sampled, only sampled candidates compete (at a
// p beyond 4 that ibdt-tune timed, radix 4 and 8, priced by the fit, do
// not), and one must be priced at least kSampledMargin below pairwise to
// replace it. Else, where a rule covers (p, blockBytes), only the
// candidates with a rule there compete (a simulation does not compare with
// a fit either; no margin: it is deterministic).
// `perCall`: the plan runs once (the blocking call): every candidate is
// priced at its run plus its measured init, and direct-write and the
// hierarchical alltoall, whose inits exchange keys or agree in an allgather,
// are candidates only when the model measured that init.
AlltoallChoice selectAlltoall(const AlltoallCostModel& model, int p, int64_t blockBytes, bool collectiveInit = true,
                              int nodes = 1, bool perCall = false, bool inPlace = false);

// The hierarchical alltoall's leader exchange among `nodes` leaders trading
// node-blocks of `nodeBlockBytes`: direct (priced as pairwise) or Bruck
// (priced as zero-copy Bruck, which it runs), every round between nodes
// paying networkRoundNs(). Direct where the model lacks zero-copy Bruck.
LeaderExchange selectLeaderExchange(const AlltoallCostModel& model, int nodes, int64_t nodeBlockBytes);

}  // namespace ibdt::collectives
