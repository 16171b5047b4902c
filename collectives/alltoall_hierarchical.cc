// Hierarchical alltoall (Jocksch, Kraushaar and Daverio, II-A, Figure 1):
// the blocks that go from one node to another travel as one message
// between two leaders, so p^2 small messages become N^2 larger ones (N
// nodes) plus node-local gathers and scatters.
//
// Leaders: the first min(L, ranks on the node) local ranks (L from
// AlltoallOptions::leaders). Leader j of a node handles the nodes n with
// n mod L_node == j, both as destinations (it sends them this node's
// blocks) and as sources (it receives their blocks for this node), so the
// partner of a node pair is fixed on both sides, as in Figure 1.
//
// Stages (collectives/staged_plan.h; every receive is posted at start):
//   0  every rank packs its send blocks, grouped by leader, in the order
//      [destination node][destination rank], and sends each leader its
//      group (a leader packs its own group straight into its gather buffer);
//   1  a leader, its gather complete, holds [source rank][node][dest rank];
//      it sends node b the sub-array [source][b's ranks] as one strided
//      message (an hvector over bytes) to b's partner leader, whose receive
//      type scatters it into [dest rank][source node][source rank]; the
//      blocks that stay on the node are copied the same way;
//   2  the leader sends each rank of its node its contiguous row;
//   3  every rank unpacks its rows into its receive buffer.
// Node-local traffic goes through the messaging layer (the shm provider on
// one host), not a shared segment: collectives do not reach below
// messaging. Messages carry packed bytes; the ranks' type signatures are
// compared once at init (an allgather), where the other algorithms compare
// them per message.
#include "collectives/alltoall_hierarchical.h"

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "collectives/staged_plan.h"
#include "datatype/checked_math.h"

namespace ibdt::collectives {
namespace {

using datatype::Datatype;
using datatype::Segment;

// The communicator's nodes, dense in node-id order, and their ranks.
struct NodeLayout {
  std::vector<std::vector<int>> ranks;  // ranks[n]: communicator ranks on node n, in rank order
  std::vector<int> leaders;             // leaders[n]: how many leaders node n has
  int myNode = 0, myLocal = 0;

  NodeLayout(const Communicator& comm, int leadersPerNode) {
    std::map<int, int> dense;
    for (int r = 0; r < comm.size(); ++r) dense.emplace(comm.node(r).nodeId, 0);
    int next = 0;
    for (auto& [id, index] : dense) index = next++;
    ranks.resize(dense.size());
    for (int r = 0; r < comm.size(); ++r) {
      std::vector<int>& node = ranks[static_cast<size_t>(dense[comm.node(r).nodeId])];
      if (r == comm.rank()) {
        myNode = dense[comm.node(r).nodeId];
        myLocal = static_cast<int>(node.size());
      }
      node.push_back(r);
    }
    for (const auto& node : ranks) leaders.push_back(std::min(leadersPerNode, static_cast<int>(node.size())));
  }
  int nodes() const { return static_cast<int>(ranks.size()); }
  int64_t size(int node) const { return static_cast<int64_t>(ranks[static_cast<size_t>(node)].size()); }
  // Leader index (local rank) on `node` that handles partner node `other`.
  int handler(int node, int other) const { return other % leaders[static_cast<size_t>(node)]; }
  int leaderRank(int node, int index) const { return ranks[static_cast<size_t>(node)][static_cast<size_t>(index)]; }
  // The nodes leader `index` of `node` handles, ascending, and their ranks in total.
  std::vector<int> handled(int node, int index) const {
    std::vector<int> out;
    for (int n = 0; n < nodes(); ++n) {
      if (handler(node, n) == index) out.push_back(n);
    }
    return out;
  }
  int64_t ranksOf(const std::vector<int>& group) const {
    int64_t total = 0;
    for (int n : group) total += size(n);
    return total;
  }
};

// A message as count x type (0-byte blocks: an empty byte message).
struct Message {
  Datatype type = Datatype::basic(datatype::BasicKind::kByte);
  int64_t count = 0;
};
Result<Message> bytesMessage(int64_t bytes) { return Message{Datatype::basic(datatype::BasicKind::kByte), bytes}; }

// `outer` rows of `inner` blocks: row i at i * outerStride, block k of a
// row at k * innerStride (bytes); one element, in row-major order.
Result<Message> gridMessage(int64_t outer, int64_t inner, int64_t block, int64_t outerStride, int64_t innerStride) {
  if (block == 0 || outer == 0 || inner == 0) return bytesMessage(0);
  const Datatype byte = Datatype::basic(datatype::BasicKind::kByte);
  IBDT_ASSIGN_OR_RETURN(Datatype row, Datatype::hvector(inner, block, innerStride, byte));
  IBDT_ASSIGN_OR_RETURN(Datatype grid, Datatype::hvector(outer, 1, outerStride, row));
  IBDT_RETURN_IF_ERROR(grid.commit());
  return Message{grid, 1};
}

// Typed block <-> packed bytes, prepared at init and run at every start.
struct BlockCopy {
  std::byte* typed;
  std::byte* packed;
};

class HierarchicalBuilder {
 public:
  HierarchicalBuilder(Communicator& comm, const AlltoallArgs& args, int leaders)
      : comm_(comm), args_(args), layout_(comm, leaders), block_(args.bytes),
        gatherTag_(comm.takePlanTag()), exchangeTag_(comm.takePlanTag()), scatterTag_(comm.takePlanTag()) {}

  Result<std::unique_ptr<PlanImpl>> build() {
    IBDT_ASSIGN_OR_RETURN(Segment send, Segment::create(args_.sendtype, args_.sendcount));
    IBDT_ASSIGN_OR_RETURN(Segment recv, Segment::create(args_.recvtype, args_.recvcount));
    sendSegment_ = std::move(send);
    recvSegment_ = std::move(recv);
    datatype::Checked checked;
    const size_t all = static_cast<size_t>(checked.mul(comm_.size(), block_));
    if (checked.overflow) return makeError(Code::kOverflow, "alltoall (hierarchical): staging buffer size overflows");
    plan_ = std::make_unique<StagedPlan>(comm_, "hierarchical", 4);
    sendStage_ = plan_->scratch(all);
    recvStage_ = plan_->scratch(all);
    if (layout_.myLocal < layout_.leaders[static_cast<size_t>(layout_.myNode)]) IBDT_RETURN_IF_ERROR(buildLeader());
    IBDT_RETURN_IF_ERROR(buildMember());
    return std::unique_ptr<PlanImpl>(std::move(plan_));
  }

 private:
  // Every rank: pack and send its group to each leader of its node (stage
  // 0), receive its row from each (stage 2) and unpack the rows (stage 3).
  Status buildMember() {
    const int node = layout_.myNode;
    int64_t offset = 0;  // in blocks, in sendStage_ and recvStage_ alike
    for (int j = 0; j < layout_.leaders[static_cast<size_t>(node)]; ++j) {
      const std::vector<int> group = layout_.handled(node, j);
      const int64_t blocks = layout_.ranksOf(group);
      const bool self = j == layout_.myLocal;
      // A leader's own group and row live in its gather and receive buffers.
      std::byte* packTo = self ? gather_ + layout_.myLocal * blocks * block_ : sendStage_ + offset * block_;
      std::byte* unpackFrom = self ? exchanged_ + layout_.myLocal * blocks * block_ : recvStage_ + offset * block_;
      int64_t k = 0;
      for (int n : group) {
        for (int peer : layout_.ranks[static_cast<size_t>(n)]) {
          packs_.push_back({const_cast<std::byte*>(args_.sendBlock(peer)), packTo + k * block_});
          (self ? ownUnpacks_ : unpacks_).push_back({args_.recvBlock(peer), unpackFrom + k * block_});
          ++k;
        }
      }
      if (!self) {
        const int leader = layout_.leaderRank(node, j);
        IBDT_RETURN_IF_ERROR(plan_->addSend(0, packTo, blocks * block_, byte(), leader, gatherTag_));
        IBDT_RETURN_IF_ERROR(plan_->addRecv(2, unpackFrom, blocks * block_, byte(), leader, scatterTag_));
      }
      offset += blocks;
    }
    plan_->setBefore(0, [packs = packs_, segment = *sendSegment_, bytes = block_] {
      return run(packs, segment, bytes, /*pack=*/true);
    });
    auto unpack = [segment = *recvSegment_, bytes = block_](const std::vector<BlockCopy>& copies) {
      return run(copies, segment, bytes, /*pack=*/false);
    };
    plan_->setBefore(2, [unpack, own = ownUnpacks_] { return unpack(own); });
    plan_->setBefore(3, [unpack, rows = unpacks_] { return unpack(rows); });
    return Status::ok();
  }

  // Leader j: gather (stage 0 receives), exchange (stage 1), scatter (stage 2).
  Status buildLeader() {
    const int node = layout_.myNode, j = layout_.myLocal;
    const std::vector<int> group = layout_.handled(node, j);
    const int64_t row = layout_.ranksOf(group), local = layout_.size(node);
    datatype::Checked checked;
    checked.mul(checked.mul(row, local), block_);
    if (checked.overflow) return makeError(Code::kOverflow, "alltoall (hierarchical): leader buffer size overflows");
    gather_ = plan_->scratch(static_cast<size_t>(row * local * block_));
    exchanged_ = plan_->scratch(static_cast<size_t>(row * local * block_));
    for (int s = 0; s < local; ++s) {
      if (s == j) continue;
      const int peer = layout_.ranks[static_cast<size_t>(node)][static_cast<size_t>(s)];
      IBDT_RETURN_IF_ERROR(plan_->addRecv(0, gather_ + s * row * block_, row * block_, byte(), peer, gatherTag_));
      IBDT_RETURN_IF_ERROR(plan_->addSend(2, exchanged_ + s * row * block_, row * block_, byte(), peer, scatterTag_));
    }
    int64_t column = 0;  // offset (in blocks) of node n within a row
    for (int n : group) {
      const int64_t remote = layout_.size(n);
      // Sent: [my source rank][n's ranks] out of the gather rows.
      IBDT_ASSIGN_OR_RETURN(Message out, gridMessage(local, remote, block_, row * block_, block_));
      // Received: n's [source rank][my ranks] into [my rank][column + source].
      IBDT_ASSIGN_OR_RETURN(Message in, gridMessage(remote, local, block_, block_, row * block_));
      std::byte* source = gather_ + column * block_;
      std::byte* target = exchanged_ + column * block_;
      if (n == node) {
        // The blocks that stay on this node: the same transposition, locally.
        IBDT_ASSIGN_OR_RETURN(datatype::TypedCopy copy,
                              datatype::TypedCopy::create(out.type, out.count, in.type, in.count));
        plan_->setBefore(1, [copy, source, target, bytes = local * local * block_] {
          return bytes == 0 ? Status::ok() : copy.run(source, target, 0, bytes);
        });
      } else {
        const int partner = layout_.leaderRank(n, layout_.handler(n, node));
        IBDT_RETURN_IF_ERROR(plan_->addSend(1, source, out.count, out.type, partner, exchangeTag_));
        IBDT_RETURN_IF_ERROR(plan_->addRecv(1, target, in.count, in.type, partner, exchangeTag_));
      }
      column += remote;
    }
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
  int64_t block_;
  int32_t gatherTag_, exchangeTag_, scatterTag_;
  std::optional<Segment> sendSegment_, recvSegment_;
  std::unique_ptr<StagedPlan> plan_;
  std::byte *sendStage_ = nullptr, *recvStage_ = nullptr, *gather_ = nullptr, *exchanged_ = nullptr;
  std::vector<BlockCopy> packs_, unpacks_, ownUnpacks_;
};


// Every rank's arguments must be valid and agree: the messages carry
// packed bytes, so this is where a mismatch is caught.
Status agreeOnArguments(Communicator& comm, const Result<AlltoallArgs>& args, int leaders) {
  int64_t mine[5] = {args.isOk() && leaders >= 1 ? 1 : 0, 0, 0, 0, leaders};
  if (args.isOk()) {
    IBDT_ASSIGN_OR_RETURN(datatype::Signature signature, datatype::signature(args->sendtype, args->sendcount));
    mine[1] = static_cast<int64_t>(signature.hash);
    mine[2] = signature.elements;
    mine[3] = args->bytes;
  }
  std::vector<int64_t> all(static_cast<size_t>(5 * comm.size()));
  IBDT_RETURN_IF_ERROR(allgather(comm, mine, 5, all.data()));
  if (!args.isOk()) return args.status();
  if (leaders < 1) {
    return makeError(Code::kInvalidArgument, "alltoall (hierarchical): ", leaders, " leaders per node (at least 1)");
  }
  for (int r = 0; r < comm.size(); ++r) {
    const int64_t* theirs = &all[static_cast<size_t>(5 * r)];
    if (theirs[0] == 0) {
      return makeError(Code::kInvalidArgument, "alltoall (hierarchical): rank ", r, " refused its arguments");
    }
    if (theirs[4] != leaders) {
      return makeError(Code::kInvalidArgument, "alltoall (hierarchical): rank ", comm.rank(), " asks for ", leaders,
                       " leaders per node, rank ", r, " for ", theirs[4]);
    }
    if (!std::equal(mine + 1, mine + 4, theirs + 1)) {
      return makeError(Code::kInvalidArgument, "alltoall (hierarchical): rank ", comm.rank(), "'s blocks (",
                       mine[3], " bytes, ", mine[2], " basic elements) do not match rank ", r, "'s (", theirs[3],
                       " bytes, ", theirs[2], " basic elements); every pair must match exactly");
    }
  }
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<PlanImpl>> makeHierarchicalAlltoall(Communicator& comm, const Result<AlltoallArgs>& args,
                                                           int leaders) {
  IBDT_RETURN_IF_ERROR(agreeOnArguments(comm, args, leaders));
  return HierarchicalBuilder(comm, *args, leaders).build();
}

}  // namespace ibdt::collectives
