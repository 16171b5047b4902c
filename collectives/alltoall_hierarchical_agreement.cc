// The hierarchical and multiple alltoall's agreement at init (one allgather
// over the communicator): every rank's arguments valid, one block signature,
// one leader count and leader exchange, groups that partition the
// communicator, and the leaders' exchange resolved the same on every rank.
// Messages carry packed bytes, so this is where a mismatch is caught, on
// every rank alike, instead of a hang.
#include <algorithm>
#include <map>
#include <vector>

#include "base/checked_math.h"
#include "collectives/alltoall_hierarchical.h"
#include "collectives/alltoall_select.h"

namespace ibdt::collectives {
namespace {

// kAuto's vote of this rank's cost model for the node-blocks of one group
// over all ranks (bytes * p^2 / N^2 on average).
LeaderExchange autoVote(Communicator& comm, int64_t bytes) {
  const int nodes = comm.nodeCount();
  const double perNode = static_cast<double>(comm.size()) / nodes;
  const auto nodeBlock = static_cast<int64_t>(static_cast<double>(bytes) * perNode * perNode);
  return selectLeaderExchange(AlltoallCostModel::fromTuning(comm.context().tuning()), nodes, nodeBlock);
}

// Whether some node has more than one leader (Bruck needs exactly one).
bool severalLeadersOnANode(const Communicator& comm, int leaders) {
  std::map<int, int> ranksOn;
  for (int r = 0; r < comm.size(); ++r) ++ranksOn[comm.node(r).nodeId];
  return std::any_of(ranksOn.begin(), ranksOn.end(),
                     [&](const auto& node) { return std::min(leaders, node.second) > 1; });
}

// Whether the plan is the one-sided relay: where a member's chunk (its
// ~groupSize / L blocks through one leader) would take the messaging
// layer's rendezvous, whose handshake legs a write and its notification
// replace; below, an eager message is one leg and cheaper than a write
// (docs/alltoall-hierarchical.md, "The relay").
bool oneSidedVote(Communicator& comm, int64_t bytes, int64_t groupSize, int leaders) {
  if (leaders < 1) return false;
  Checked checked;
  const int64_t chunk = checked.mul(bytes, (groupSize + leaders - 1) / leaders);
  return checked.overflow || comm.context().exchangeSingleCopy(comm.contextId(), chunk);
}

}  // namespace

Result<HierarchicalAgreement> agreeOnHierarchical(Communicator& comm, const Result<AlltoallArgs>& args,
                                                  const AlltoallOptions& options, const GroupPlace& place,
                                                  const std::string& name) {
  constexpr size_t kFields = 11;
  const int leaders = options.leaders;
  const auto requested = static_cast<int64_t>(options.leaderExchange);
  int64_t mine[kFields] = {
      args.isOk() && leaders >= 1 ? 1 : 0,           0, 0, 0, leaders, place.group, place.rank, place.size, requested,
      static_cast<int64_t>(LeaderExchange::kDirect), 0};
  if (args.isOk()) {
    IBDT_ASSIGN_OR_RETURN(datatype::Signature signature, datatype::signature(args->sendtype, args->sendcount));
    mine[1] = static_cast<int64_t>(signature.hash);
    mine[2] = signature.elements;
    mine[3] = args->bytes;
    mine[9] = static_cast<int64_t>(autoVote(comm, args->bytes));
    mine[10] = oneSidedVote(comm, args->bytes, place.size, leaders) ? 1 : 0;
  }
  std::vector<int64_t> all(kFields * static_cast<size_t>(comm.size()));
  IBDT_RETURN_IF_ERROR(allgather(comm, mine, kFields, all.data()));
  if (!args.isOk()) return args.status();
  if (leaders < 1) return makeError(Code::kInvalidArgument, name, ": ", leaders, " leaders per node (at least 1)");
  HierarchicalAgreement agreed;
  RankGroups& groups = agreed.groups;
  std::map<std::pair<int64_t, int64_t>, int> seen;  // (group, index) -> rank
  for (int r = 0; r < comm.size(); ++r) {
    const int64_t* theirs = &all[kFields * static_cast<size_t>(r)];
    if (theirs[0] == 0) return makeError(Code::kInvalidArgument, name, ": rank ", r, " refused its arguments");
    if (theirs[4] != leaders) {
      return makeError(Code::kInvalidArgument, name, ": rank ", comm.rank(), " asks for ", leaders,
                       " leaders per node, rank ", r, " for ", theirs[4]);
    }
    if (theirs[8] != requested) {
      return makeError(Code::kInvalidArgument, name, ": rank ", comm.rank(), " asks for the ",
                       leaderExchangeName(options.leaderExchange), " leader exchange, rank ", r, " for ",
                       leaderExchangeName(static_cast<LeaderExchange>(theirs[8])));
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
  const bool several = severalLeadersOnANode(comm, leaders);
  if (options.leaderExchange == LeaderExchange::kBruck && several) {
    return makeError(Code::kInvalidArgument, name, ": the bruck leader exchange needs one leader per node (", leaders,
                     " leaders per node asked for)");
  }
  agreed.exchange = options.leaderExchange;
  if (agreed.exchange == LeaderExchange::kAuto) {  // rank 0's model decides (the nodes' tuning files may differ)
    agreed.exchange = several ? LeaderExchange::kDirect : static_cast<LeaderExchange>(all[9]);
  }
  // Rank 0's vote, as for the exchange: the ranks' thresholds may differ. A
  // forced Bruck exchange keeps the messages (the relay has no exchange).
  agreed.oneSided = all[10] != 0 && agreed.exchange == LeaderExchange::kDirect;
  return agreed;
}

}  // namespace ibdt::collectives
