// Hierarchical alltoall (Jocksch, Kraushaar and Daverio, II-A, Figure 1,
// and II-B) and multiple alltoall (II-C): the blocks that go from one node
// to another travel as one node-block between two leaders, so p^2 small
// messages become N^2 larger ones (N nodes) plus node-local gathers and
// scatters. The multiple alltoall runs the alltoalls of several groups (the
// rows of a process grid) at once: only pairs of one group exchange, and a
// node-block carries the blocks of every group.
//
// Leaders: the first min(L, ranks on the node) local ranks (L from
// AlltoallOptions::leaders). Leader j of a node handles the nodes n with
// n mod L_node == j, both as destinations (it sends them this node's
// blocks) and as sources (it receives their blocks for this node), so the
// partner of a node pair is fixed on both sides, as in Figure 1.
//
// A leader's buffers: G holds, for each node n it handles, the node-block
// [local source][its partners on n] it sends n, contiguous; E holds the
// node-block [source on n][local destination] n sends it, in n's order
// (node-major; one-sided hops lay them out member-major, below).
//
// Stages (collectives/staged_plan.h; every receive is posted at start):
//   0       every rank packs its send blocks, one chunk per leader, in the
//           order [destination node][destination rank], and sends each
//           leader its chunk; the leader's receive type spreads the chunk
//           over G's node-blocks (its own chunk it packs straight into G);
//   1 .. W  the exchange. Direct: each node-block is one message to the
//           partner leader, window w (distance (n - node) mod N in
//           ((w-1)t, wt], t the throttle) sent once the receives of window
//           w - 1 arrived, so at most t node pairs per leader are in flight
//           and no leader waits on a later window (the windows follow the
//           distance on every leader). The own node's block is E in place.
//           Bruck (one leader per node, W = 1): the zero-copy Bruck
//           alltoallv of collectives/alltoallv_bruck.cc among the leaders,
//           G's node-blocks to E's, ceil(log2 N) rounds;
//   W + 1   the leader sends each rank of its node its row [node][source],
//           an hindexed type over E;
//   W + 2   every rank unpacks its rows into its receive buffer.
// A rank's chunk and its row at a leader hold the same ranks (the group's
// ranks on that leader's nodes), so both have one offset per rank.
//
// In place (kInPlace): every block is packed out of the receive buffer in
// stage 0, before any stage unpacks into it, so in place needs no memory
// beyond the staging every run has (docs/alltoall-hierarchical.md).
// Node-local hops go through the messaging layer (collectives do not reach
// below it), as messages or, where a chunk would take the rendezvous, as
// one-sided writes (the agreement's vote): the leader exposes each member's
// run of G and each member its row buffer at init, so a run writes a chunk
// straight into G and a row straight into the member's buffer, one write
// and a notification each. G is then [source][node] and E [destination]
// [node] (member-major), the exchange's messages typed over their runs,
// and the node's own blocks are moved from G to E before the scatter.
// Messages carry packed bytes; the ranks' type signatures are
// compared once at init (alltoall_hierarchical_agreement.cc), where the
// other algorithms compare them per message.
#include "collectives/alltoall_hierarchical.h"

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "base/checked_math.h"
#include "base/copy_bytes.h"
#include "collectives/alltoall_hierarchical_layout.h"
#include "collectives/alltoall_schedule.h"
#include "collectives/alltoallv_algorithms.h"
#include "collectives/staged_plan.h"

namespace ibdt::collectives {
namespace {

using datatype::Datatype;
using datatype::Segment;
using hierarchical::Message;
using hierarchical::NodeLayout;
using hierarchical::Runs;

// Typed block <-> packed bytes, prepared at init and run at every start.
struct BlockCopy {
  std::byte* typed;
  std::byte* packed;
};

// A leader's node-block with node `node`, in G (out) and E (in).
struct NodeBlock {
  int node = 0;
  int64_t outOffset = 0;          // node-major: where it starts in G (blocks)
  std::vector<int64_t> outAt;     // per local source: where its part starts in G (blocks)
  std::vector<int64_t> outCount;  // per local source: its part's blocks
  int64_t outBlocks = 0, inBlocks = 0;
  std::byte* in = nullptr;       // node-major: in E, or G's own block (direct, own node); member-major: E
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
        scatterTag_(comm.takePlanTag()) {}

  Result<std::unique_ptr<PlanImpl>> build() {
    IBDT_ASSIGN_OR_RETURN(Segment send, Segment::create(args_.sendtype, args_.sendcount));
    IBDT_ASSIGN_OR_RETURN(Segment recv, Segment::create(args_.recvtype, args_.recvcount));
    sendSegment_ = std::move(send);
    recvSegment_ = std::move(recv);
    Checked checked;
    checked.mul(comm_.size(), block_);  // a rank's staging holds at most p blocks each way
    if (checked.overflow) return makeError(Code::kOverflow, name_, ": staging buffer size overflows");
    plan_ = std::make_unique<StagedPlan>(comm_, name_, static_cast<size_t>(windows_) + 3);
    const bool leader = layout_.myLocal < layout_.leaders[static_cast<size_t>(layout_.myNode)];
    std::unique_ptr<Communicator> leaders;
    if (bruck_) {  // collective over comm: every rank takes part
      IBDT_ASSIGN_OR_RETURN(leaders, comm_.split(leader ? 0 : kUndefinedColour, layout_.myNode));
    }
    if (leader) IBDT_RETURN_IF_ERROR(buildLeader(std::move(leaders)));
    IBDT_RETURN_IF_ERROR(buildMember());
    for (const PendingPut& put : puts_) {  // every rank's keys are out: none waits on another's putInit
      IBDT_RETURN_IF_ERROR(plan_->addPut(put.stage, put.buf, put.bytes, put.peer, put.tag));
    }
    return std::unique_ptr<PlanImpl>(std::move(plan_));
  }

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
  // Blocks `rank` exchanges with the nodes of `group` (its chunk and its row at their leader).
  int64_t blocksWith(const std::vector<int>& group, int rank) const {
    int64_t total = 0;
    for (int n : group) total += static_cast<int64_t>(partnersOn(n, rank).size());
    return total;
  }
  const std::vector<int>& locals() const { return layout_.ranks[static_cast<size_t>(layout_.myNode)]; }
  // Where the block (source -> local destination d) of node-block `nb` waits in E.
  std::byte* inSlot(const NodeBlock& nb, int source, size_t d) const {
    const std::vector<int>& sources = layout_.ranks[static_cast<size_t>(nb.node)];
    const auto s = static_cast<size_t>(std::find(sources.begin(), sources.end(), source) - sources.begin());
    return nb.in + nb.inIndex[s * locals().size() + d] * block_;
  }

  // Whether the user's blocks `indices` (of a type with `stride` bytes from
  // one block to the next) are one dense run in that order: a contiguous
  // type, blocks back to back, consecutive indices (ranks in blocks on the
  // nodes, one leader). Never in place, where the staging is what keeps a
  // row from landing on blocks not yet sent.
  bool denseRun(const Datatype& type, int64_t stride, const std::vector<int>& indices) const {
    if (args_.inPlace || indices.empty() || block_ == 0 || stride != block_ || !type.contiguous() ||
        type.trueLb() != 0) {
      return false;
    }
    for (size_t k = 1; k < indices.size(); ++k) {
      if (indices[k] != indices[k - 1] + 1) return false;
    }
    return true;
  }

  // Every rank: pack and send its chunk to each leader of its node (stage
  // 0), receive its row from each (scatter stage) and unpack the rows (last
  // stage). A leader's own chunk and row live in its G and E.
  Status buildMember() {
    const int node = layout_.myNode, me = comm_.rank();
    // Per leader of this node: the user's blocks of the chunk and the row it
    // trades with it, in their order, and whether either needs staging (not
    // with itself, whose chunk and row are in its G and E, nor for a dense run).
    struct Part {
      std::vector<int> group, indices;
      bool self = false, sendsInPlace = false, receivesInPlace = false;
    };
    std::vector<Part> parts;
    int64_t sendStaged = 0, recvStaged = 0;  // in blocks
    for (int j = 0; j < layout_.leaders[static_cast<size_t>(node)]; ++j) {
      Part part;
      part.group = layout_.handled(node, j);
      part.self = j == layout_.myLocal;
      for (int n : part.group) {
        for (int partner : partnersOn(n, me)) part.indices.push_back(groups_.rank[static_cast<size_t>(partner)]);
      }
      part.sendsInPlace = !part.self && denseRun(args_.sendtype, args_.sendStride, part.indices);
      part.receivesInPlace = !part.self && denseRun(args_.recvtype, args_.recvStride, part.indices);
      const auto blocks = static_cast<int64_t>(part.indices.size());
      if (!part.self && !part.sendsInPlace) sendStaged += blocks;
      if (!part.self && !part.receivesInPlace) recvStaged += blocks;
      parts.push_back(std::move(part));
    }
    std::byte* sendStage = plan_->scratch(static_cast<size_t>(sendStaged * block_));
    std::byte* recvStage = plan_->scratch(static_cast<size_t>(recvStaged * block_));
    for (size_t j = 0; j < parts.size(); ++j) {
      const Part& part = parts[j];
      const auto blocks = static_cast<int64_t>(part.indices.size());
      for (size_t g = 0, k = 0; g < part.group.size(); ++g) {
        const std::vector<int> partners = partnersOn(part.group[g], me);  // the same ranks as destinations and sources
        for (size_t q = 0; q < partners.size(); ++q, ++k) {
          const int index = part.indices[k];
          std::byte* packTo = sendStage + static_cast<int64_t>(k) * block_;
          std::byte* unpackFrom = recvStage + static_cast<int64_t>(k) * block_;
          if (part.self) {
            const NodeBlock& nb = nodeBlocks_[g];
            const auto mine = static_cast<size_t>(layout_.myLocal);
            packTo = gather_ + (nb.outAt[mine] + static_cast<int64_t>(q)) * block_;
            unpackFrom = inSlot(nb, partners[q], mine);
          }
          if (!part.sendsInPlace) packs_.push_back({const_cast<std::byte*>(args_.sendBlock(index)), packTo});
          if (!part.receivesInPlace) {
            (part.self ? ownUnpacks_ : unpacks_).push_back({args_.recvBlock(index), unpackFrom});
          }
        }
      }
      if (part.self) continue;
      const int leader = layout_.leaderRank(node, static_cast<int>(j));
      const std::byte* chunk = part.sendsInPlace ? args_.sendBlock(part.indices.front()) : sendStage;
      std::byte* row = part.receivesInPlace ? args_.recvBlock(part.indices.front()) : recvStage;
      if (oneSided_) {  // the chunk written into the leader's G, the row written here by the leader
        puts_.push_back({0, chunk, blocks * block_, leader, gatherTag_});
        IBDT_RETURN_IF_ERROR(plan_->addExposure(scatterStage(), row, blocks * block_, leader, scatterTag_));
      } else {
        IBDT_RETURN_IF_ERROR(plan_->addSend(0, chunk, blocks * block_, byte(), leader, gatherTag_));
        IBDT_RETURN_IF_ERROR(plan_->addRecv(scatterStage(), row, blocks * block_, byte(), leader, scatterTag_));
      }
      if (!part.sendsInPlace) sendStage += blocks * block_;
      if (!part.receivesInPlace) recvStage += blocks * block_;
    }
    plan_->setBefore(0, [packs = packs_, segment = *sendSegment_, bytes = block_] {
      return run(packs, segment, bytes, /*pack=*/true);
    });
    auto unpack = [segment = *recvSegment_, bytes = block_](const std::vector<BlockCopy>& copies) {
      return run(copies, segment, bytes, /*pack=*/false);
    };
    plan_->setBefore(scatterStage(), [unpack, own = ownUnpacks_, moves = ownNodeMoves_, bytes = block_] {
      for (const auto& [from, to] : moves) copyBytes(to, from, static_cast<size_t>(bytes));
      return unpack(own);
    });
    plan_->setBefore(scatterStage() + 1, [unpack, rows = unpacks_] { return unpack(rows); });
    return Status::ok();
  }

  // Leader j: the node-blocks' places, then gather (stage 0 receives),
  // exchange, scatter.
  Status buildLeader(std::unique_ptr<Communicator> leaders) {
    const int node = layout_.myNode, j = layout_.myLocal;
    const size_t m = locals().size();
    int64_t out = 0, in = 0;
    for (int n : layout_.handled(node, j)) {
      NodeBlock nb;
      nb.node = n;
      nb.outOffset = out;
      for (int s : locals()) {
        nb.outAt.push_back(out + nb.outBlocks);
        nb.outCount.push_back(static_cast<int64_t>(partnersOn(n, s).size()));
        nb.outBlocks += nb.outCount.back();
      }
      for (int source : layout_.ranks[static_cast<size_t>(n)]) {  // n's order: source, then destination
        for (int d : locals()) nb.inIndex.push_back(together(source, d) ? nb.inBlocks++ : -1);
      }
      out += nb.outBlocks;
      in += nb.inBlocks;
      nodeBlocks_.push_back(std::move(nb));
    }
    // Node-major (two-sided): a node-block is one run of G and of E. Member-major
    // (one-sided): a member's chunk is one run of G, [source][node], and its
    // row one run of E, [destination][node], so each is one write.
    auto aliased = [&](const NodeBlock& nb) { return nb.node == node && !bruck_ && !oneSided_; };  // E's block is G's
    for (const NodeBlock& nb : nodeBlocks_) in -= aliased(nb) ? nb.inBlocks : 0;
    Checked checked;
    const int64_t bytes = checked.mul(checked.add(out, in), block_);
    if (checked.overflow) return makeError(Code::kOverflow, name_, ": leader buffer size overflows");
    gather_ = plan_->scratch(static_cast<size_t>(bytes));  // G, then E: one base for every type over them
    exchanged_ = gather_ + out * block_;
    if (oneSided_) {
      placeMemberMajor();
    } else {
      std::byte* exchanged = exchanged_;
      for (NodeBlock& nb : nodeBlocks_) {
        nb.in = aliased(nb) ? gather_ + nb.outOffset * block_ : exchanged;
        if (!aliased(nb)) exchanged += nb.inBlocks * block_;
      }
    }
    for (size_t s = 0; s < m; ++s) {
      if (static_cast<int>(s) == j) continue;
      Runs chunk, row;
      for (const NodeBlock& nb : nodeBlocks_) {
        chunk.add(nb.outAt[s] * block_, nb.outCount[s] * block_);
        for (int source : partnersOn(nb.node, locals()[s])) row.add(inSlot(nb, source, s) - gather_, block_);
      }
      if (oneSided_) {  // one run each (member-major), or none
        const int64_t chunkBytes = chunk.single() ? chunk.lengths[0] : 0, rowBytes = row.single() ? row.lengths[0] : 0;
        std::byte* chunkAt = gather_ + (chunk.single() ? chunk.offsets[0] : 0);
        std::byte* rowAt = gather_ + (row.single() ? row.offsets[0] : 0);
        IBDT_RETURN_IF_ERROR(plan_->addExposure(0, chunkAt, chunkBytes, locals()[s], gatherTag_));
        puts_.push_back({scatterStage(), rowAt, rowBytes, locals()[s], scatterTag_});
        continue;
      }
      IBDT_ASSIGN_OR_RETURN(Message gathered, chunk.message());
      IBDT_ASSIGN_OR_RETURN(Message scattered, row.message());
      IBDT_RETURN_IF_ERROR(plan_->addRecv(0, gather_, gathered.count, gathered.type, locals()[s], gatherTag_));
      IBDT_RETURN_IF_ERROR(
          plan_->addSend(scatterStage(), gather_, scattered.count, scattered.type, locals()[s], scatterTag_));
    }
    // Members write the next run's chunks into G once they have this run's
    // rows: the scatter waits until the exchange no longer reads G.
    if (oneSided_) plan_->waitForSends(scatterStage());
    return bruck_ ? buildBruckExchange(std::move(leaders)) : buildDirectExchange();
  }

  // Member-major G and E (one-sided), and the blocks that stay on the node
  // moved from G to E before the scatter (node-major aliases them instead).
  void placeMemberMajor() {
    const size_t m = locals().size();
    std::vector<int64_t> chunkAt(m), rowAt(m);
    for (size_t s = 0, g = 0, e = 0; s < m; ++s) {
      chunkAt[s] = static_cast<int64_t>(g);
      rowAt[s] = static_cast<int64_t>(e);
      for (const NodeBlock& nb : nodeBlocks_) {
        g += static_cast<size_t>(nb.outCount[s]);
        e += partnersOn(nb.node, locals()[s]).size();
      }
    }
    for (NodeBlock& nb : nodeBlocks_) {
      nb.in = exchanged_;
      for (size_t s = 0; s < m; ++s) {
        nb.outAt[s] = chunkAt[s];
        chunkAt[s] += nb.outCount[s];
      }
      for (size_t k = 0; k < nb.inIndex.size(); ++k) {  // [source][destination d]: next block of d's row
        if (nb.inIndex[k] >= 0) nb.inIndex[k] = rowAt[k % m]++;
      }
      if (nb.node != layout_.myNode) continue;
      for (size_t s = 0; s < m; ++s) {
        const std::vector<int> partners = partnersOn(nb.node, locals()[s]);
        for (size_t q = 0; q < partners.size(); ++q) {
          const auto d =
              static_cast<size_t>(std::find(locals().begin(), locals().end(), partners[q]) - locals().begin());
          ownNodeMoves_.emplace_back(gather_ + (nb.outAt[s] + static_cast<int64_t>(q)) * block_,
                                     inSlot(nb, locals()[s], d));
        }
      }
    }
  }

  // One message per node-block with each partner leader, in windows by distance.
  Status buildDirectExchange() {
    const int node = layout_.myNode, nodes = layout_.nodes();
    for (const NodeBlock& nb : nodeBlocks_) {
      if (nb.node == node) continue;  // stays: aliased, or moved from G to E
      const int partner = layout_.leaderRank(nb.node, layout_.handler(nb.node, node));
      const size_t sendStage = windowStage((nb.node - node + nodes) % nodes);
      const size_t recvStage = windowStage((node - nb.node + nodes) % nodes);
      // The wire order [source][destination]: one run of each in node-major
      // G and E, one run per source in member-major G, per block in its E.
      Runs out, in;
      for (size_t s = 0; s < locals().size(); ++s) out.add(nb.outAt[s] * block_, nb.outCount[s] * block_);
      for (size_t k = 0; k < nb.inIndex.size(); ++k) {
        if (nb.inIndex[k] >= 0) in.add(nb.in - gather_ + nb.inIndex[k] * block_, block_);
      }
      IBDT_ASSIGN_OR_RETURN(Message sent, bytesOrRuns(out));
      IBDT_ASSIGN_OR_RETURN(Message received, bytesOrRuns(in));
      IBDT_RETURN_IF_ERROR(
          plan_->addSend(sendStage, gather_ + sent.offset, sent.count, sent.type, partner, exchangeTag_));
      IBDT_RETURN_IF_ERROR(
          plan_->addRecv(recvStage, gather_ + received.offset, received.count, received.type, partner, exchangeTag_));
    }
    return Status::ok();
  }

  // A message over G and E: one run is plain bytes from where it starts.
  static Result<Message> bytesOrRuns(const Runs& runs) {
    if (!runs.single()) return runs.message();
    return Message{byte(), runs.lengths[0], runs.offsets[0]};
  }

  // The leaders' zero-copy Bruck alltoallv of the node-blocks (one leader
  // per node: the leaders' communicator rank is the node's index).
  Status buildBruckExchange(std::unique_ptr<Communicator> leaders) {
    Communicator& across = plan_->keep(std::move(leaders));
    const size_t nodes = nodeBlocks_.size();
    std::vector<int64_t> sendcounts(nodes), sdispls(nodes), recvcounts(nodes), rdispls(nodes);
    for (size_t n = 0; n < nodes; ++n) {
      const NodeBlock& nb = nodeBlocks_[n];
      sendcounts[n] = nb.outBlocks * block_;
      sdispls[n] = nb.outOffset * block_;
      recvcounts[n] = nb.inBlocks * block_;
      rdispls[n] = nb.in - exchanged_;  // not aliased with Bruck
    }
    IBDT_ASSIGN_OR_RETURN(AlltoallvArgs args, checkAlltoallvArgs(across, gather_, sendcounts, sdispls, byte(),
                                                                 exchanged_, recvcounts, rdispls, byte()));
    IBDT_ASSIGN_OR_RETURN(auto bruck, buildZeroCopyBruckAlltoallv(across, args, datatype::BasicKind::kByte));
    plan_->addSubPlan(1, std::move(bruck));
    return Status::ok();
  }

  static Status run(const std::vector<BlockCopy>& copies, const Segment& segment, int64_t bytes, bool pack) {
    if (bytes == 0) return Status::ok();
    for (const BlockCopy& copy : copies) {
      IBDT_RETURN_IF_ERROR(pack ? segment.pack(copy.typed, 0, bytes, copy.packed)
                                : segment.unpack(copy.typed, 0, bytes, copy.packed));
    }
    return Status::ok();
  }
  static Datatype byte() { return Datatype::basic(datatype::BasicKind::kByte); }

  Communicator& comm_;
  const AlltoallArgs& args_;
  NodeLayout layout_;
  const RankGroups& groups_;
  std::string name_;
  int64_t block_;
  bool bruck_;
  bool oneSided_;  // node-local hops by writes (docs/alltoall-hierarchical.md, "One-sided node phases")
  int windows_;
  int64_t throttle_;
  int32_t gatherTag_, exchangeTag_, scatterTag_;
  std::optional<Segment> sendSegment_, recvSegment_;
  std::unique_ptr<StagedPlan> plan_;
  std::byte *gather_ = nullptr, *exchanged_ = nullptr;
  std::vector<NodeBlock> nodeBlocks_;  // leaders only: per handled node, ascending
  std::vector<BlockCopy> packs_, unpacks_, ownUnpacks_;
  std::vector<std::pair<const std::byte*, std::byte*>> ownNodeMoves_;  // member-major: G -> E, on the node
  std::vector<PendingPut> puts_;
};

}  // namespace

Result<std::unique_ptr<PlanImpl>> makeNodeMergedAlltoall(Communicator& comm, const Result<AlltoallArgs>& args,
                                                         const AlltoallOptions& options, const GroupPlace& place,
                                                         std::string name) {
  IBDT_ASSIGN_OR_RETURN(HierarchicalAgreement agreed, agreeOnHierarchical(comm, args, options, place, name));
  return MergedBuilder(comm, *args, options, agreed, std::move(name)).build();
}

Result<std::unique_ptr<PlanImpl>> makeHierarchicalAlltoall(Communicator& comm, const Result<AlltoallArgs>& args,
                                                           const AlltoallOptions& options) {
  return makeNodeMergedAlltoall(comm, args, options, {0, comm.rank(), comm.size()}, "hierarchical");
}

}  // namespace ibdt::collectives
