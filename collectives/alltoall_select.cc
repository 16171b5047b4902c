// kAuto's choice by the α-β cost model (alltoall_select.h).
#include "collectives/alltoall_select.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/checked_math.h"
#include "base/log.h"
#include "collectives/alltoall_schedule.h"
#include "collectives/alltoall_shared_memory.h"

namespace ibdt::collectives {
namespace {

// Used where no tuning file is in force. Rounded from ibdt-tune's p = 2
// timings on the 2-core AMD EPYC VM of docs/alltoall-selection.md (where a
// rank has its core: ~1 us per pairwise exchange, ~2.5 us for a Bruck round
// with its copies), not from its p = 3, 4 timings, which oversubscribe the
// cores and cost 10-20 us per message. Pairwise's messages overlap (a
// throttle of 8 in flight), Bruck's rounds do not; the per-byte terms order
// zero-copy < modified < basic by their local copies (the γ term).
// {fixedNs, perMessageNs, perByteNs}, in kPricedAlltoalls' order.
constexpr messaging::CollectiveCost kBuiltIn[] = {
    {500, 1000, 0.35},   // pairwise
    {1500, 1500, 0.50},  // bruck-modified
    {1500, 1500, 0.35},  // bruck-zero-copy
    {1500, 1500, 0.60},  // bruck-basic
    {1500, 1200, 0.50},  // bruck-radix
    // direct-write: per peer a write plus a zero-byte ready and notification
    // (2.5 us); per byte 0.24, pairwise's 0.35 scaled by the two's measured
    // ratio at 64 KiB - 1 MiB, p = 2 (docs/alltoall-direct-writes.md: 0.16
    // against 0.24 ns/B), so that it wins from ~16-23 KiB blocks.
    {1500, 2500, 0.24},
    // hierarchical: its leader's messages (the node-local scatter and the
    // exchange between nodes). A stage's messages are posted together, as
    // pairwise's: 1 us each; its three dependent stages (gather, exchange,
    // scatter) cost pairwise's fixed term each. Per byte as modified Bruck
    // (a block is packed, spread by a typed receive, gathered by a typed send
    // and unpacked). Not fitted: no p = 2 timing has several ranks per node.
    {1500, 1000, 0.50},
    // shared-memory: a pack into the segment, a flag, p - 1 flag reads and
    // copies out, no message (docs/alltoall-shared-memory.md). At p = 2 on
    // that VM: 0.40 us at 8 B (pairwise 0.83), 17 us at 256 KiB
    // (direct-write 24), 145 us at 1 MiB (direct-write 134: two copies
    // through a buffer beyond the caches against the kernel's one). Per
    // byte as direct-write plus a little, so that it gives way from ~350 KiB.
    {300, 150, 0.25},
};
}  // namespace

AlltoallVolume AlltoallCostModel::volumeOf(AlltoallAlgorithm algorithm, int64_t radix, int p, int64_t blockBytes,
                                           int nodes) const {
  Checked checked;
  const int64_t chunk = checked.mul(blockBytes, std::max(p, 1));  // the agreement's estimate, one leader
  const bool relay =
      algorithm == AlltoallAlgorithm::kHierarchical && blockBytes > 0 && (checked.overflow || relays(chunk));
  return alltoallVolume(algorithm, radix, p, blockBytes, nodes, relay);
}

AlltoallVolume alltoallVolume(AlltoallAlgorithm algorithm, int64_t radix, int p, int64_t blockBytes, int nodes,
                              bool relay) {
  // Rank 0's sends: every rank of these schedules sends as many (the
  // schedule test checks it), and this is what the plans post; in the
  // hierarchical alltoall rank 0 is a leader, whose work the others wait for.
  ScheduleShape shape;
  shape.ranks = std::max(p, 1);
  shape.blockBytes = blockBytes;
  shape.radix = radix;
  const int nodeCount = std::clamp(nodes, 1, shape.ranks);
  shape.ranksPerNode = (shape.ranks + nodeCount - 1) / nodeCount;
  shape.throttle = AlltoallOptions{}.throttle;
  shape.relay = relay;
  Result<AlltoallSchedule> schedule = alltoallSchedule(algorithm, shape);
  if (!schedule.isOk()) return {};
  const ScheduleTotals totals = scheduleTotals(*schedule);
  const auto rounds = static_cast<int64_t>(schedule->rounds.size());
  const int64_t window = schedule->window > 0 ? schedule->window : std::max<int64_t>(rounds, 1);
  const auto steps = static_cast<double>((rounds + window - 1) / window);
  const double crossing =
      algorithm != AlltoallAlgorithm::kHierarchical ? steps
      : relay                                       ? 2  // the readies, then the relays
              : leaderExchangeWindows((shape.ranks + shape.ranksPerNode - 1) / shape.ranksPerNode, shape.throttle);
  return {static_cast<double>(totals.sentMessages), static_cast<double>(totals.sentBytes), steps, crossing};
}

std::string alltoallFitName(AlltoallAlgorithm algorithm) {
  return "alltoall/" + std::string(alltoallAlgorithmName(algorithm));
}

std::string alltoallInitFitName(AlltoallAlgorithm algorithm) {
  return "alltoall-init/" + std::string(alltoallAlgorithmName(algorithm));
}

size_t AlltoallCostModel::slot(AlltoallAlgorithm algorithm) {
  for (size_t i = 0; i < kPricedAlltoalls.size(); ++i) {
    if (kPricedAlltoalls[i] == algorithm) return i;
  }
  return kPricedAlltoalls.size();
}

bool AlltoallCostModel::has(AlltoallAlgorithm algorithm) const {
  const size_t i = slot(algorithm);
  return i < present_.size() && present_[i];
}

void AlltoallCostModel::set(AlltoallAlgorithm algorithm, const messaging::CollectiveCost& cost) {
  const size_t i = slot(algorithm);
  if (i >= costs_.size()) return;
  costs_[i] = cost;
  present_[i] = true;
}

bool AlltoallCostModel::hasInit(AlltoallAlgorithm algorithm) const {
  const size_t i = slot(algorithm);
  return i < initPresent_.size() && initPresent_[i];
}

void AlltoallCostModel::setInit(AlltoallAlgorithm algorithm, const messaging::CollectiveCost& cost) {
  const size_t i = slot(algorithm);
  if (i >= initCosts_.size()) return;
  initCosts_[i] = cost;
  initPresent_[i] = true;
}

void AlltoallCostModel::setSamples(AlltoallAlgorithm algorithm, std::vector<messaging::CollectiveSample> samples) {
  const size_t i = slot(algorithm);
  if (i < samples_.size()) samples_[i] = std::move(samples);
}

void AlltoallCostModel::setInitSamples(AlltoallAlgorithm algorithm, std::vector<messaging::CollectiveSample> samples) {
  const size_t i = slot(algorithm);
  if (i < initSamples_.size()) initSamples_[i] = std::move(samples);
}

std::optional<double> sampledNs(const std::vector<messaging::CollectiveSample>& samples, int p, int64_t blockBytes) {
  if (blockBytes <= 0) return std::nullopt;
  const messaging::CollectiveSample* below = nullptr;  // the largest timed size <= blockBytes
  const messaging::CollectiveSample* above = nullptr;  // the smallest timed size >= blockBytes
  for (const messaging::CollectiveSample& sample : samples) {
    if (sample.ranks != p || sample.blockBytes <= 0 || sample.ns <= 0) continue;
    if (sample.blockBytes <= blockBytes && (below == nullptr || sample.blockBytes > below->blockBytes)) below = &sample;
    if (sample.blockBytes >= blockBytes && (above == nullptr || sample.blockBytes < above->blockBytes)) above = &sample;
  }
  if (below == nullptr || above == nullptr) return std::nullopt;
  if (below->blockBytes == above->blockBytes) return below->ns;
  const double at = std::log(double(blockBytes) / double(below->blockBytes)) /
                    std::log(double(above->blockBytes) / double(below->blockBytes));
  return below->ns * std::pow(above->ns / below->ns, at);
}

namespace {
// bruck-radix was timed at kTunedRadix only, the hierarchical alltoall on
// kTunedNodes nodes only; every other algorithm has one schedule per p.
bool samplesApply(AlltoallAlgorithm algorithm, int64_t radix, int nodes) {
  if (algorithm == AlltoallAlgorithm::kHierarchical) return nodes == kTunedNodes;
  if (algorithm == AlltoallAlgorithm::kSharedMemory) return nodes <= 1;  // timed on one node (its only use)
  return algorithm != AlltoallAlgorithm::kBruckRadix || radix == kTunedRadix;
}
}  // namespace

bool AlltoallCostModel::sampled(AlltoallAlgorithm algorithm, int64_t radix, int p, int64_t blockBytes,
                                int nodes) const {
  return has(algorithm) && samplesApply(algorithm, radix, nodes) &&
         sampledNs(samples_[slot(algorithm)], p, blockBytes).has_value();
}

double AlltoallCostModel::predictInitNs(AlltoallAlgorithm algorithm, int64_t radix, int p, int64_t blockBytes,
                                        int nodes) const {
  if (!hasInit(algorithm)) return 0;
  if (samplesApply(algorithm, radix, nodes)) {
    if (auto ns = sampledNs(initSamples_[slot(algorithm)], p, blockBytes)) return *ns;
  }
  const AlltoallVolume volume = volumeOf(algorithm, radix, p, blockBytes, nodes);
  return std::max(0.0, initCosts_[slot(algorithm)].ns(volume.messages, volume.bytes));
}

AlltoallCostModel AlltoallCostModel::builtIn() {
  AlltoallCostModel model;
  for (size_t i = 0; i < kPricedAlltoalls.size(); ++i) model.set(kPricedAlltoalls[i], kBuiltIn[i]);
  return model;
}

AlltoallCostModel AlltoallCostModel::fromTuning(const messaging::Tuning* tuning) {
  if (tuning == nullptr) return builtIn();
  AlltoallCostModel model;
  model.fromFile_ = true;
  for (AlltoallAlgorithm algorithm : kPricedAlltoalls) {
    for (const messaging::CollectiveFit& fit : tuning->collectives) {
      if (fit.name == alltoallFitName(algorithm)) {
        model.set(algorithm, fit.cost);
        model.setSamples(algorithm, fit.samples);
      }
      if (fit.name == alltoallInitFitName(algorithm)) {
        model.setInit(algorithm, fit.cost);
        model.setInitSamples(algorithm, fit.samples);
      }
    }
  }
  if (!model.has(AlltoallAlgorithm::kPairwise)) return builtIn();
  Result<std::vector<AlltoallRule>> rules = alltoallRules(*tuning);
  if (rules.isOk()) {
    model.setRules(std::move(*rules));
  } else {
    log::once(log::Level::kWarn, "alltoall-rules-ignored",
              strCat(rules.status().toString(), "; the simulated rules are left out, the fits apply"));
  }
  return model;
}

std::optional<double> AlltoallCostModel::simulatedNs(AlltoallAlgorithm algorithm, int64_t radix, int p,
                                                     int64_t blockBytes, int nodes) const {
  if (algorithm != AlltoallAlgorithm::kBruckRadix) radix = 2;
  int64_t perNode = 0;
  if (algorithm == AlltoallAlgorithm::kHierarchical) {
    if (nodes <= 1 || p <= 0) return std::nullopt;
    perNode = (p + std::min(nodes, p) - 1) / std::min(nodes, p);
  }
  for (const AlltoallRule& rule : rules_) {
    if (rule.algorithm == algorithm && rule.radix == radix && rule.ranksPerNode == perNode) {
      return rulePredictionNs(rule, p, blockBytes);
    }
  }
  return std::nullopt;
}

bool AlltoallCostModel::simulatedAt(int p, int64_t blockBytes, int nodes) const {
  return std::any_of(rules_.begin(), rules_.end(), [&](const AlltoallRule& rule) {
    return simulatedNs(rule.algorithm, rule.radix, p, blockBytes, nodes).has_value();
  });
}

double AlltoallCostModel::predictNs(AlltoallAlgorithm algorithm, int64_t radix, int p, int64_t blockBytes,
                                    int nodes) const {
  if (!has(algorithm)) return std::numeric_limits<double>::infinity();
  const AlltoallVolume volume = volumeOf(algorithm, radix, p, blockBytes, nodes);
  const double network = nodes > 1 ? networkRoundNs_ * volume.networkRounds : 0;
  if (samplesApply(algorithm, radix, nodes)) {
    if (auto ns = sampledNs(samples_[slot(algorithm)], p, blockBytes)) return *ns + network;
  }
  if (auto ns = simulatedNs(algorithm, radix, p, blockBytes, nodes)) return *ns;
  const double fit = std::max(0.0, costs_[slot(algorithm)].ns(volume.messages, volume.bytes));
  // Any radix anchors on kTunedRadix's samples (one fit serves every radix).
  if (samplesApply(algorithm, kTunedRadix, nodes)) {
    if (auto ns = anchoredNs(algorithm, radix, p, blockBytes, nodes, fit)) return *ns + network;
  }
  return fit + network;
}

std::optional<double> AlltoallCostModel::anchoredNs(AlltoallAlgorithm algorithm, int64_t radix, int p,
                                                    int64_t blockBytes, int nodes, double fitNs) const {
  const std::vector<messaging::CollectiveSample>& samples = samples_[slot(algorithm)];
  int64_t anchor = 0;
  for (const messaging::CollectiveSample& sample : samples) {
    if (sample.ranks < p && sample.ranks > anchor) anchor = sample.ranks;
  }
  if (anchor < 2) return std::nullopt;
  const std::optional<double> measured = sampledNs(samples, static_cast<int>(anchor), blockBytes);
  if (!measured) return std::nullopt;  // the block size is outside what was timed there
  // bruck-radix was timed at kTunedRadix: the anchor is that radix's time and volume.
  const int64_t timedRadix = algorithm == AlltoallAlgorithm::kBruckRadix ? kTunedRadix : radix;
  const AlltoallVolume there = volumeOf(algorithm, timedRadix, static_cast<int>(anchor), blockBytes, nodes);
  const double fitThere = costs_[slot(algorithm)].ns(there.messages, there.bytes);
  if (fitThere <= 0 || fitNs <= 0) return std::nullopt;
  return *measured * fitNs / fitThere;
}

std::string AlltoallChoice::name() const {
  if (algorithm == AlltoallAlgorithm::kBruckRadix) return strCat("bruck-radix-", radix);
  return std::string(alltoallAlgorithmName(algorithm));
}

AlltoallChoice AlltoallChoice::fromCode(int64_t code) {
  return {static_cast<AlltoallAlgorithm>(code / 4096), code % 4096, 0};
}

AlltoallChoice selectAlltoall(const AlltoallCostModel& model, int p, int64_t blockBytes, bool collectiveInit, int nodes,
                              bool perCall, bool inPlace) {
  auto price = [&](AlltoallAlgorithm algorithm, int64_t radix) {
    const double run = model.predictNs(algorithm, radix, p, blockBytes, nodes);
    return perCall ? run + model.predictInitNs(algorithm, radix, p, blockBytes, nodes) : run;
  };
  AlltoallChoice best;
  best.predictedNs = price(AlltoallAlgorithm::kPairwise, 2);
  if (p <= 1 || blockBytes == 0) return best;
  const AlltoallChoice pairwise = best;
  // Measured here: only what was measured here competes (a fit does not
  // compare with timings), and must beat pairwise by the margin (kSampledMargin).
  const bool measured = model.sampled(AlltoallAlgorithm::kPairwise, 2, p, blockBytes);
  // Simulated here (and not measured): only what has a rule here competes.
  const bool simulated = !measured && model.simulatedAt(p, blockBytes, nodes);
  auto ruled = [&](AlltoallAlgorithm algorithm, int64_t radix) {
    return model.simulatedNs(algorithm, radix, p, blockBytes, nodes).has_value();
  };
  const double toBeat = measured ? pairwise.predictedNs * (1 - kSampledMargin)
                        : simulated && !ruled(AlltoallAlgorithm::kPairwise, 2) ? std::numeric_limits<double>::infinity()
                                                                               : pairwise.predictedNs;
  best.predictedNs = std::numeric_limits<double>::infinity();
  auto consider = [&](AlltoallAlgorithm algorithm, int64_t radix) {
    if (measured && !model.sampled(algorithm, radix, p, blockBytes, nodes)) return;
    // The simulator's rules model the network; within a node the shared-memory fit is all there is.
    if (simulated && !ruled(algorithm, radix) && algorithm != AlltoallAlgorithm::kSharedMemory) return;
    const double ns = price(algorithm, radix);
    if (ns < toBeat && ns < best.predictedNs) best = {algorithm, radix, ns};
  };
  // Per call a collective init (keys, an allgather) comes every call: only a measured init prices that.
  auto collectiveCandidate = [&](AlltoallAlgorithm algorithm) {
    return collectiveInit && (!perCall || model.hasInit(algorithm));
  };
  for (AlltoallAlgorithm algorithm : kPricedAlltoalls) {
    if (algorithm == AlltoallAlgorithm::kDirectWrite) {
      if (!inPlace && collectiveCandidate(algorithm)) consider(algorithm, 2);
    } else if (algorithm == AlltoallAlgorithm::kSharedMemory) {
      const int64_t segment = sharedMemoryAlltoallBytes(p, blockBytes);
      if (nodes <= 1 && segment > 0 && segment <= kAutoSharedMemoryMaxBytes && collectiveCandidate(algorithm)) {
        consider(algorithm, 2);
      }
    } else if (algorithm == AlltoallAlgorithm::kHierarchical) {
      // Several nodes and several ranks on some node: else it only adds hops.
      if (nodes > 1 && p > nodes && collectiveCandidate(algorithm)) consider(algorithm, 2);
    } else if (p == 2) {
      // Every Bruck form is then the same single exchange as pairwise, which
      // has no copies; a fit that says otherwise is noise. (Direct-write is
      // another mechanism: no staging, no handshake per message.)
      continue;
    } else if (algorithm == AlltoallAlgorithm::kBruckRadix) {
      for (int64_t radix : kAutoRadixes) {
        if (radix < p) consider(algorithm, radix);
      }
    } else if (algorithm != AlltoallAlgorithm::kPairwise) {
      consider(algorithm, 2);
    }
  }
  return std::isinf(best.predictedNs) ? pairwise : best;
}

LeaderExchange selectLeaderExchange(const AlltoallCostModel& model, int nodes, int64_t nodeBlockBytes) {
  if (nodes <= 2) return LeaderExchange::kDirect;  // one exchange either way; direct copies nothing
  const double direct = model.predictNs(AlltoallAlgorithm::kPairwise, 2, nodes, nodeBlockBytes, nodes);
  const double bruck = model.predictNs(AlltoallAlgorithm::kBruckZeroCopy, 2, nodes, nodeBlockBytes, nodes);
  return bruck < direct ? LeaderExchange::kBruck : LeaderExchange::kDirect;
}

}  // namespace ibdt::collectives
