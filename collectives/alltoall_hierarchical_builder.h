// collectives/alltoall_hierarchical_builder.h — the builder of the
// hierarchical and multiple alltoall's StagedPlan (the algorithm:
// collectives/alltoall_hierarchical.cc). Every rank's part (pack, gather,
// unpack) is in alltoall_hierarchical_member.cc, a leader's (its G and E,
// the exchange) in alltoall_hierarchical_leader.cc.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "collectives/alltoall_hierarchical.h"
#include "collectives/alltoall_hierarchical_layout.h"
#include "collectives/alltoall_schedule.h"
#include "collectives/staged_plan.h"

namespace ibdt::collectives::hierarchical {

// Typed block <-> packed bytes, prepared at init and run at every start.
struct BlockCopy {
  std::byte* typed;
  std::byte* packed;
};

// A leader's node-block with node `node`, in G (out) and E (in).
struct NodeBlock {
  int node = 0;
  int64_t outOffset = 0;          // where it starts in G (blocks)
  std::vector<int64_t> outAt;     // per local source: where its part starts in G (blocks)
  std::vector<int64_t> outCount;  // per local source: its part's blocks
  int64_t outBlocks = 0, inBlocks = 0;
  std::byte* in = nullptr;       // in E, or G's own block (direct, own node)
  std::vector<int64_t> inIndex;  // [source on node][local destination]: block index from `in`, or -1
};

// A put whose key is awaited once every exposure of the init went out.
struct PendingPut {
  size_t stage;
  const std::byte* buf;
  int64_t bytes;
  int peer;
  int32_t tag;
};

class MergedBuilder {
 public:
  MergedBuilder(Communicator& comm, const AlltoallArgs& args, const AlltoallOptions& options,
                const HierarchicalAgreement& agreed, std::string name)
      : comm_(comm),
        args_(args),
        layout_(comm, options.leaders),
        groups_(agreed.groups),
        name_(std::move(name)),
        block_(args.bytes),
        bruck_(agreed.exchange == LeaderExchange::kBruck),
        oneSided_(agreed.oneSided),
        windows_(exchangeWindows(layout_.nodes(), options.throttle, bruck_)),
        throttle_(options.throttle),
        gatherTag_(comm.takePlanTag()),
        exchangeTag_(comm.takePlanTag()),
        scatterTag_(comm.takePlanTag()),
        readyTag_(oneSided_ ? comm.takePlanTag() : 0) {}

  Result<std::unique_ptr<PlanImpl>> build();

 private:
  // Exchange stages: Bruck is one; direct, one per window of `throttle`
  // distances (collectives/alltoall_schedule.h).
  static int exchangeWindows(int nodes, int64_t throttle, bool bruck) {
    return bruck ? 1 : leaderExchangeWindows(nodes, throttle);
  }
  size_t scatterStage() const { return static_cast<size_t>(windows_) + 1; }
  // The exchange stage of a node pair `distance` apart (1 .. N - 1).
  size_t windowStage(int distance) const { return static_cast<size_t>(leaderExchangeWindow(distance, throttle_)); }
  bool together(int a, int b) const {
    return groups_.group[static_cast<size_t>(a)] == groups_.group[static_cast<size_t>(b)];
  }
  // The ranks of `node` that exchange with `rank`, in rank order.
  std::vector<int> partnersOn(int node, int rank) const {
    std::vector<int> out;
    for (int peer : layout_.ranks[static_cast<size_t>(node)]) {
      if (together(peer, rank)) out.push_back(peer);
    }
    return out;
  }
  const std::vector<int>& locals() const { return layout_.ranks[static_cast<size_t>(layout_.myNode)]; }
  // Where the block (source -> local destination d) of node-block `nb` waits in E.
  std::byte* inSlot(const NodeBlock& nb, int source, size_t d) const {
    const std::vector<int>& sources = layout_.ranks[static_cast<size_t>(nb.node)];
    const auto s = static_cast<size_t>(std::find(sources.begin(), sources.end(), source) - sources.begin());
    return nb.in + nb.inIndex[s * locals().size() + d] * block_;
  }

  // --- every rank (alltoall_hierarchical_member.cc) ---
  bool denseRun(const datatype::Datatype& type, int64_t stride, const std::vector<int>& indices) const;
  Status buildMember();
  static Status run(const std::vector<BlockCopy>& copies, const datatype::Segment& segment, int64_t bytes, bool pack);

  // --- one-sided: the relay (alltoall_hierarchical_relay.cc) ---
  static constexpr size_t kRelayStages = 4;  // readies, writes into G and on the node, relays, unpack
  struct RelaySlots {
    struct Slot {
      int leader;  // local index of the leader whose G holds it
      int d;       // the remote destination
      int64_t at;  // its first block in that G
    };
    std::vector<Slot> slots;      // by remote node, then destination
    std::vector<int64_t> blocks;  // per leader of this node: its G's blocks
  };
  RelaySlots relaySlots() const;
  Status buildRelay();

  // --- leaders (alltoall_hierarchical_leader.cc) ---
  Status buildLeader(std::unique_ptr<Communicator> leaders);
  Status buildDirectExchange();
  Status buildBruckExchange(std::unique_ptr<Communicator> leaders);
  // A message over G and E: one run is plain bytes from where it starts.
  static Result<Message> bytesOrRuns(const Runs& runs) {
    if (!runs.single()) return runs.message();
    return Message{byte(), runs.lengths[0], runs.offsets[0]};
  }
  static datatype::Datatype byte() { return datatype::Datatype::basic(datatype::BasicKind::kByte); }

  Communicator& comm_;
  const AlltoallArgs& args_;
  NodeLayout layout_;
  const RankGroups& groups_;
  std::string name_;
  int64_t block_;
  bool bruck_;
  bool oneSided_;  // the relay: every hop a write (docs/alltoall-hierarchical.md, "The relay")
  int windows_;
  int64_t throttle_;
  int32_t gatherTag_, exchangeTag_, scatterTag_;  // the relay: into G, G to the destination, on the node
  int32_t readyTag_;                              // the relay's readies
  std::optional<datatype::Segment> sendSegment_, recvSegment_;
  std::unique_ptr<StagedPlan> plan_;
  std::byte *gather_ = nullptr, *exchanged_ = nullptr;
  std::vector<NodeBlock> nodeBlocks_;  // leaders only: per handled node, ascending
  std::vector<BlockCopy> packs_, unpacks_, ownUnpacks_;
  std::vector<PendingPut> puts_;
};

}  // namespace ibdt::collectives::hierarchical
