// The hierarchical alltoall's one-sided form, the relay (where a chunk
// would take the rendezvous; docs/alltoall-hierarchical.md, "The relay"):
// every block is written at most twice and no leader reorders or scatters.
//
//   - a block for a rank of the own node is written straight into that
//     rank's receive buffer (one write);
//   - a block for a rank d on another node n is written into the G of the
//     leader that handles n, at [n][d][source] (the leader copies its own
//     there), and that leader writes each run G[n][d][*], the blocks of every
//     source on its node for d, straight into d's receive buffer: one write
//     per remote destination, the only writes between nodes.
//
// Stages: 0 every target of a write sends its origin a zero-byte "ready"
// (it started this run, so its buffers are free: G relayed, the receive
// buffer read by the user; in place, every block already packed out);
// 1 the writes into G and to the own node, once the readies arrived; 2 a
// leader's relay writes, once G is full; 3 the unpacking of what landed
// in staging (derived types, in place, a remote run that is not one dense
// run of the receive buffer).
#include <set>

#include "base/checked_math.h"
#include "collectives/alltoall_hierarchical_builder.h"

namespace ibdt::collectives::hierarchical {

// G of every leader of this node: per remote node n (ascending) and rank d
// on n, a run of the blocks d gets from its partners on this node, in rank
// order, kept by the leader that handles n.
MergedBuilder::RelaySlots MergedBuilder::relaySlots() const {
  const int node = layout_.myNode;
  RelaySlots out;
  out.blocks.assign(static_cast<size_t>(layout_.leaders[static_cast<size_t>(node)]), 0);
  for (int n = 0; n < layout_.nodes(); ++n) {
    if (n == node) continue;
    const int j = layout_.handler(node, n);
    for (int d : layout_.ranks[static_cast<size_t>(n)]) {
      const auto sources = static_cast<int64_t>(partnersOn(node, d).size());
      if (sources == 0) continue;
      out.slots.push_back({j, d, out.blocks[static_cast<size_t>(j)]});
      out.blocks[static_cast<size_t>(j)] += sources;
    }
  }
  return out;
}

Status MergedBuilder::buildRelay() {
  if (block_ == 0) return Status::ok();  // nothing to move
  const int me = comm_.rank(), node = layout_.myNode;
  const auto index = [&](int rank) { return groups_.rank[static_cast<size_t>(rank)]; };
  const auto oneBlock = [&](const datatype::Datatype& type, int64_t stride, int rank) {
    return denseRun(type, stride, {index(rank)});
  };
  const RelaySlots g = relaySlots();
  const bool leader = layout_.myLocal < layout_.leaders[static_cast<size_t>(node)];
  Checked checked;  // G holds up to m (p - m) blocks, the staging up to 2p: more than build()'s p
  if (leader) {
    const int64_t bytes = checked.mul(g.blocks[static_cast<size_t>(layout_.myLocal)], block_);
    if (checked.overflow) return makeError(Code::kOverflow, name_, ": leader buffer size overflows");
    gather_ = plan_->scratch(static_cast<size_t>(bytes));
  }

  // Staging: one block per outgoing block not written from the user's send
  // buffer, per incoming one not landing in the receive buffer, and the own
  // block where it is not one contiguous block of the receive buffer.
  int64_t staged = 0;
  std::set<int> targets, writers;           // whom this rank writes into, who writes into it
  for (int d = 0; d < comm_.size(); ++d) {  // not a leader's own blocks for the nodes it relays to: packed into G
    const int n = layout_.nodeOf[static_cast<size_t>(d)];
    if (!together(me, d) || d == me || (n != node && layout_.leaderRank(node, layout_.handler(node, n)) == me))
      continue;
    if (!oneBlock(args_.sendtype, args_.sendStride, d)) ++staged;
  }
  for (int s : locals()) {
    if (s != me && together(me, s) && !oneBlock(args_.recvtype, args_.recvStride, s)) ++staged;
  }
  std::vector<std::pair<int, std::vector<int>>> incoming;  // (node, its sources for me) per remote node
  for (int n = 0; n < layout_.nodes(); ++n) {
    if (n == node) continue;
    std::vector<int> sources = partnersOn(n, me), indices;
    if (sources.empty()) continue;
    for (int s : sources) indices.push_back(index(s));
    if (!denseRun(args_.recvtype, args_.recvStride, indices)) staged += static_cast<int64_t>(sources.size());
    incoming.emplace_back(n, std::move(sources));
  }
  // The own block: in place it stays where it is; else packed straight into
  // a contiguous receive block, or through one staged block.
  const bool ownDirect = oneBlock(args_.recvtype, args_.recvStride, me);
  const int64_t stagedBytes = checked.mul(staged + (args_.inPlace || ownDirect ? 0 : 1), block_);
  if (checked.overflow) return makeError(Code::kOverflow, name_, ": staging buffer size overflows");
  std::byte* stage = plan_->scratch(static_cast<size_t>(stagedBytes));
  auto take = [&](int64_t blocks) {
    std::byte* at = stage;
    stage += blocks * block_;
    return at;
  };
  if (!args_.inPlace) {
    std::byte* own = ownDirect ? args_.recvBlock(index(me)) : take(1);
    packs_.push_back({const_cast<std::byte*>(args_.sendBlock(index(me))), own});
    if (!ownDirect) unpacks_.push_back({args_.recvBlock(index(me)), own});
  }

  // Exposures first (every rank's keys go out before any addPut waits).
  if (leader) {  // G's slots, one block per member's block
    for (const RelaySlots::Slot& slot : g.slots) {
      if (slot.leader != layout_.myLocal) continue;
      const std::vector<int> sources = partnersOn(node, slot.d);
      for (size_t q = 0; q < sources.size(); ++q) {
        std::byte* at = gather_ + (slot.at + static_cast<int64_t>(q)) * block_;
        if (sources[q] == me) {
          packs_.push_back({const_cast<std::byte*>(args_.sendBlock(index(slot.d))), at});
          continue;
        }
        IBDT_RETURN_IF_ERROR(plan_->addExposure(1, at, block_, sources[q], gatherTag_));
        writers.insert(sources[q]);
      }
      puts_.push_back(
          {2, gather_ + slot.at * block_, static_cast<int64_t>(sources.size()) * block_, slot.d, exchangeTag_});
      targets.insert(slot.d);
    }
  }
  for (int s : locals()) {  // a block from each rank of this node
    if (s == me || !together(me, s)) continue;
    std::byte* to = args_.recvBlock(index(s));
    if (!oneBlock(args_.recvtype, args_.recvStride, s)) {
      to = take(1);
      unpacks_.push_back({args_.recvBlock(index(s)), to});
    }
    IBDT_RETURN_IF_ERROR(plan_->addExposure(2, to, block_, s, scatterTag_));
    writers.insert(s);
  }
  for (const auto& [n, sources] : incoming) {  // one run from each remote node's leader
    std::vector<int> indices;
    for (int s : sources) indices.push_back(index(s));
    std::byte* to = args_.recvBlock(indices.front());
    if (!denseRun(args_.recvtype, args_.recvStride, indices)) {
      to = take(static_cast<int64_t>(sources.size()));
      for (size_t q = 0; q < indices.size(); ++q) {
        unpacks_.push_back({args_.recvBlock(indices[q]), to + static_cast<int64_t>(q) * block_});
      }
    }
    const int relay = layout_.leaderRank(n, layout_.handler(n, node));
    IBDT_RETURN_IF_ERROR(plan_->addExposure(2, to, static_cast<int64_t>(sources.size()) * block_, relay, exchangeTag_));
    writers.insert(relay);
  }

  // This rank's writes: into each leader's G (in that leader's slot order)
  // and to the own node.
  auto source = [&](int d) {
    if (oneBlock(args_.sendtype, args_.sendStride, d)) return args_.sendBlock(index(d));
    std::byte* at = take(1);
    packs_.push_back({const_cast<std::byte*>(args_.sendBlock(index(d))), at});
    return static_cast<const std::byte*>(at);
  };
  for (const RelaySlots::Slot& slot : g.slots) {
    const int leaderRank = layout_.leaderRank(node, slot.leader);
    if (leaderRank == me) continue;  // packed into G above
    const std::vector<int> sources = partnersOn(node, slot.d);
    const auto q = std::find(sources.begin(), sources.end(), me);
    if (q == sources.end()) continue;
    puts_.push_back({1, source(slot.d), block_, leaderRank, gatherTag_});
    targets.insert(leaderRank);
  }
  for (int d : locals()) {
    if (d == me || !together(me, d)) continue;
    puts_.push_back({1, source(d), block_, d, scatterTag_});
    targets.insert(d);
  }

  // Readies: a target tells each of its writers that it started this run.
  for (int writer : writers) IBDT_RETURN_IF_ERROR(plan_->addSend(0, nullptr, 0, byte(), writer, readyTag_));
  for (int target : targets) IBDT_RETURN_IF_ERROR(plan_->addRecv(0, nullptr, 0, byte(), target, readyTag_));

  plan_->setBefore(0, [packs = packs_, segment = *sendSegment_, bytes = block_] {
    return run(packs, segment, bytes, /*pack=*/true);
  });
  plan_->setBefore(kRelayStages - 1, [unpacks = unpacks_, segment = *recvSegment_, bytes = block_] {
    return run(unpacks, segment, bytes, /*pack=*/false);
  });
  return Status::ok();
}

}  // namespace ibdt::collectives::hierarchical
