// Hierarchical alltoall (Jocksch, Kraushaar and Daverio, II-A, Figure 1)
// and multiple alltoall (II-C): the blocks that go from one node to
// another travel as one message between two leaders, so p^2 small messages
// become N^2 larger ones (N nodes) plus node-local gathers and scatters.
// The multiple alltoall runs the alltoalls of several groups (the rows of
// a process grid) at once: only pairs of one group exchange, and a node
// pair's message carries the blocks of every group.
//
// Leaders: the first min(L, ranks on the node) local ranks (L from
// AlltoallOptions::leaders). Leader j of a node handles the nodes n with
// n mod L_node == j, both as destinations (it sends them this node's
// blocks) and as sources (it receives their blocks for this node), so the
// partner of a node pair is fixed on both sides, as in Figure 1.
//
// Stages (collectives/staged_plan.h; every receive is posted at start):
//   0  every rank packs its send blocks, one chunk per leader, in the order
//      [destination node][destination rank], and sends each leader its
//      chunk (a leader packs its own straight into its gather buffer);
//   1  a leader, its gather complete, holds [source rank][node][dest rank];
//      it sends node n the blocks [source][n's ranks] as one message (an
//      hindexed type over the gather buffer) to n's partner leader, whose
//      receive type places them into [dest rank][source node][source rank];
//      the blocks that stay on the node are copied the same way;
//   2  the leader sends each rank of its node its row (contiguous);
//   3  every rank unpacks its rows into its receive buffer.
// A rank's chunk and its row at a leader hold the same ranks (the group's
// ranks on that leader's nodes), so both have one offset per rank.
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
#include "base/checked_math.h"

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
  // Leader index (local rank) on `node` that handles partner node `other`.
  int handler(int node, int other) const { return other % leaders[static_cast<size_t>(node)]; }
  int leaderRank(int node, int index) const { return ranks[static_cast<size_t>(node)][static_cast<size_t>(index)]; }
  // The nodes leader `index` of `node` handles, ascending.
  std::vector<int> handled(int node, int index) const {
    std::vector<int> out;
    for (int n = 0; n < nodes(); ++n) {
      if (handler(node, n) == index) out.push_back(n);
    }
    return out;
  }
};

// A message as count x type over packed bytes: the listed (offset, length)
// runs of a buffer, in order (no run: an empty message).
struct Message {
  Datatype type = Datatype::basic(datatype::BasicKind::kByte);
  int64_t count = 0;
};
struct Runs {
  std::vector<int64_t> lengths, offsets;
  void add(int64_t offset, int64_t length) {
    if (length == 0) return;
    if (!offsets.empty() && offsets.back() + lengths.back() == offset) {
      lengths.back() += length;  // adjacent: one run
      return;
    }
    offsets.push_back(offset);
    lengths.push_back(length);
  }
  Result<Message> message() const {
    if (offsets.empty()) return Message{};
    IBDT_ASSIGN_OR_RETURN(Datatype type,
                          Datatype::hindexed(lengths, offsets, Datatype::basic(datatype::BasicKind::kByte)));
    IBDT_RETURN_IF_ERROR(type.commit());
    return Message{type, 1};
  }
};

// Typed block <-> packed bytes, prepared at init and run at every start.
struct BlockCopy {
  std::byte* typed;
  std::byte* packed;
};

class MergedBuilder {
 public:
  MergedBuilder(Communicator& comm, const AlltoallArgs& args, int leaders, const RankGroups& groups, std::string name)
      : comm_(comm), args_(args), layout_(comm, leaders), groups_(groups), name_(std::move(name)), block_(args.bytes),
        gatherTag_(comm.takePlanTag()), exchangeTag_(comm.takePlanTag()), scatterTag_(comm.takePlanTag()) {}

  Result<std::unique_ptr<PlanImpl>> build() {
    IBDT_ASSIGN_OR_RETURN(Segment send, Segment::create(args_.sendtype, args_.sendcount));
    IBDT_ASSIGN_OR_RETURN(Segment recv, Segment::create(args_.recvtype, args_.recvcount));
    sendSegment_ = std::move(send);
    recvSegment_ = std::move(recv);
    Checked checked;
    const size_t all = static_cast<size_t>(checked.mul(comm_.size(), block_));
    if (checked.overflow) return makeError(Code::kOverflow, name_, ": staging buffer size overflows");
    plan_ = std::make_unique<StagedPlan>(comm_, name_, 4);
    sendStage_ = plan_->scratch(all);
    recvStage_ = plan_->scratch(all);
    if (layout_.myLocal < layout_.leaders[static_cast<size_t>(layout_.myNode)]) IBDT_RETURN_IF_ERROR(buildLeader());
    IBDT_RETURN_IF_ERROR(buildMember());
    return std::unique_ptr<PlanImpl>(std::move(plan_));
  }

 private:
  bool together(int a, int b) const { return groups_.group[static_cast<size_t>(a)] == groups_.group[static_cast<size_t>(b)]; }
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

  // Every rank: pack and send its chunk to each leader of its node (stage
  // 0), receive its row from each (stage 2) and unpack the rows (stage 3).
  Status buildMember() {
    const int node = layout_.myNode, me = comm_.rank();
    int64_t offset = 0;  // in blocks, in sendStage_ and recvStage_ alike
    for (int j = 0; j < layout_.leaders[static_cast<size_t>(node)]; ++j) {
      const std::vector<int> group = layout_.handled(node, j);
      const int64_t blocks = blocksWith(group, me);
      const bool self = j == layout_.myLocal;
      // A leader's own chunk and row live in its gather and receive buffers.
      std::byte* packTo = self ? gather_ + leaderOffset_[static_cast<size_t>(j)] * block_ : sendStage_ + offset * block_;
      std::byte* unpackFrom = self ? exchanged_ + leaderOffset_[static_cast<size_t>(j)] * block_ : recvStage_ + offset * block_;
      int64_t k = 0;
      for (int n : group) {
        for (int peer : partnersOn(n, me)) {  // the same ranks as destinations and as sources
          const int index = groups_.rank[static_cast<size_t>(peer)];
          packs_.push_back({const_cast<std::byte*>(args_.sendBlock(index)), packTo + k * block_});
          (self ? ownUnpacks_ : unpacks_).push_back({args_.recvBlock(index), unpackFrom + k * block_});
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

  // Leader j: gather (stage 0 receives), exchange (stage 1), scatter (stage
  // 2). Local rank s's chunk and row both start at leaderOffset_[s] blocks
  // (a rank sends and receives the same number of blocks).
  Status buildLeader() {
    const int node = layout_.myNode, j = layout_.myLocal;
    const std::vector<int>& locals = layout_.ranks[static_cast<size_t>(node)];
    const std::vector<int> group = layout_.handled(node, j);
    int64_t total = 0;
    for (int s : locals) {
      leaderOffset_.push_back(total);
      total += blocksWith(group, s);
    }
    Checked checked;
    const int64_t bytes = checked.mul(total, block_);
    if (checked.overflow) return makeError(Code::kOverflow, name_, ": leader buffer size overflows");
    gather_ = plan_->scratch(static_cast<size_t>(bytes));
    exchanged_ = plan_->scratch(static_cast<size_t>(bytes));
    for (size_t s = 0; s < locals.size(); ++s) {
      if (static_cast<int>(s) == j) continue;
      const int64_t length = blocksWith(group, locals[s]) * block_;
      IBDT_RETURN_IF_ERROR(plan_->addRecv(0, gather_ + leaderOffset_[s] * block_, length, byte(), locals[s], gatherTag_));
      IBDT_RETURN_IF_ERROR(plan_->addSend(2, exchanged_ + leaderOffset_[s] * block_, length, byte(), locals[s], scatterTag_));
    }
    for (int n : group) IBDT_RETURN_IF_ERROR(buildExchange(group, n));
    return Status::ok();
  }

  // Offset (blocks) of node n's partners in local rank s's chunk or row.
  int64_t columnOf(const std::vector<int>& group, size_t s, int n) const {
    const int rank = layout_.ranks[static_cast<size_t>(layout_.myNode)][s];
    int64_t column = leaderOffset_[s];
    for (int m : group) {
      if (m == n) break;
      column += static_cast<int64_t>(partnersOn(m, rank).size());
    }
    return column;
  }

  // With node n: send [my source][its partners on n] from the gather chunks;
  // receive n's [source][my destinations] into the rows of my ranks. The
  // blocks that stay on this node take the same way as a local copy.
  Status buildExchange(const std::vector<int>& group, int n) {
    const int node = layout_.myNode;
    const std::vector<int>& locals = layout_.ranks[static_cast<size_t>(node)];
    Runs out, in;
    for (size_t s = 0; s < locals.size(); ++s) {
      out.add(columnOf(group, s, n) * block_, static_cast<int64_t>(partnersOn(n, locals[s]).size()) * block_);
    }
    for (int source : layout_.ranks[static_cast<size_t>(n)]) {  // the sender's order: source, then destination
      for (size_t d = 0; d < locals.size(); ++d) {
        if (!together(source, locals[d])) continue;
        const std::vector<int> partners = partnersOn(n, locals[d]);
        const int64_t index = std::find(partners.begin(), partners.end(), source) - partners.begin();
        in.add((columnOf(group, d, n) + index) * block_, block_);
      }
    }
    IBDT_ASSIGN_OR_RETURN(Message sent, out.message());
    IBDT_ASSIGN_OR_RETURN(Message received, in.message());
    if (n == node) {
      IBDT_ASSIGN_OR_RETURN(datatype::TypedCopy copy,
                            datatype::TypedCopy::create(sent.type, sent.count, received.type, received.count));
      plan_->setBefore(1, [copy, from = gather_, to = exchanged_, bytes = copy.size()] {
        return bytes == 0 ? Status::ok() : copy.run(from, to, 0, bytes);
      });
      return Status::ok();
    }
    const int partner = layout_.leaderRank(n, layout_.handler(n, node));
    IBDT_RETURN_IF_ERROR(plan_->addSend(1, gather_, sent.count, sent.type, partner, exchangeTag_));
    return plan_->addRecv(1, exchanged_, received.count, received.type, partner, exchangeTag_);
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
  int32_t gatherTag_, exchangeTag_, scatterTag_;
  std::optional<Segment> sendSegment_, recvSegment_;
  std::unique_ptr<StagedPlan> plan_;
  std::byte *sendStage_ = nullptr, *recvStage_ = nullptr, *gather_ = nullptr, *exchanged_ = nullptr;
  std::vector<int64_t> leaderOffset_;  // per local rank, in blocks (leaders only)
  std::vector<BlockCopy> packs_, unpacks_, ownUnpacks_;
};

// Every rank's arguments must be valid and agree, and the groups must be
// consistent (every member reports the same size, and ranks 0 .. size - 1
// once each): the messages carry packed bytes, so this is where a mismatch
// is caught, on every rank alike. Returns every rank's group and index.
Result<RankGroups> agreeOnArguments(Communicator& comm, const Result<AlltoallArgs>& args, int leaders,
                                    const GroupPlace& place, const std::string& name) {
  constexpr size_t kFields = 8;
  int64_t mine[kFields] = {args.isOk() && leaders >= 1 ? 1 : 0, 0, 0, 0, leaders, place.group, place.rank, place.size};
  if (args.isOk()) {
    IBDT_ASSIGN_OR_RETURN(datatype::Signature signature, datatype::signature(args->sendtype, args->sendcount));
    mine[1] = static_cast<int64_t>(signature.hash);
    mine[2] = signature.elements;
    mine[3] = args->bytes;
  }
  std::vector<int64_t> all(kFields * static_cast<size_t>(comm.size()));
  IBDT_RETURN_IF_ERROR(allgather(comm, mine, kFields, all.data()));
  if (!args.isOk()) return args.status();
  if (leaders < 1) return makeError(Code::kInvalidArgument, name, ": ", leaders, " leaders per node (at least 1)");
  RankGroups groups;
  std::map<std::pair<int64_t, int64_t>, int> seen;  // (group, index) -> rank
  for (int r = 0; r < comm.size(); ++r) {
    const int64_t* theirs = &all[kFields * static_cast<size_t>(r)];
    if (theirs[0] == 0) return makeError(Code::kInvalidArgument, name, ": rank ", r, " refused its arguments");
    if (theirs[4] != leaders) {
      return makeError(Code::kInvalidArgument, name, ": rank ", comm.rank(), " asks for ", leaders,
                       " leaders per node, rank ", r, " for ", theirs[4]);
    }
    if (!std::equal(mine + 1, mine + 4, theirs + 1)) {
      return makeError(Code::kInvalidArgument, name, ": rank ", comm.rank(), "'s blocks (", mine[3], " bytes, ",
                       mine[2], " basic elements) do not match rank ", r, "'s (", theirs[3], " bytes, ", theirs[2],
                       " basic elements); every pair must match exactly");
    }
    if (theirs[6] < 0 || theirs[6] >= theirs[7] || !seen.emplace(std::make_pair(theirs[5], theirs[6]), r).second) {
      return makeError(Code::kInvalidArgument, name, ": rank ", r, " is rank ", theirs[6], " of ", theirs[7],
                       " in its group, which another rank is too (the groups must partition the communicator)");
    }
    groups.group.push_back(static_cast<int>(theirs[5]));
    groups.rank.push_back(static_cast<int>(theirs[6]));
  }
  for (int r = 0; r < comm.size(); ++r) {  // every index below the size taken, by ranks reporting that size
    const int64_t* theirs = &all[kFields * static_cast<size_t>(r)];
    for (int64_t index = 0; index < theirs[7]; ++index) {
      auto member = seen.find({theirs[5], index});
      if (member == seen.end() || all[kFields * static_cast<size_t>(member->second) + 7] != theirs[7]) {
        return makeError(Code::kInvalidArgument, name, ": rank ", r, "'s group of ", theirs[7],
                         " ranks has no consistent rank ", index, " (the groups must partition the communicator)");
      }
    }
  }
  return groups;
}

}  // namespace

Result<std::unique_ptr<PlanImpl>> makeNodeMergedAlltoall(Communicator& comm, const Result<AlltoallArgs>& args,
                                                         int leaders, const GroupPlace& place, std::string name) {
  IBDT_ASSIGN_OR_RETURN(RankGroups groups, agreeOnArguments(comm, args, leaders, place, name));
  return MergedBuilder(comm, *args, leaders, groups, std::move(name)).build();
}

Result<std::unique_ptr<PlanImpl>> makeHierarchicalAlltoall(Communicator& comm, const Result<AlltoallArgs>& args,
                                                           int leaders) {
  return makeNodeMergedAlltoall(comm, args, leaders, {0, comm.rank(), comm.size()}, "hierarchical");
}

}  // namespace ibdt::collectives
