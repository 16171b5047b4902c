// The SimGrid replay of the schedules (sim_run.h).
#include "tools/sim/sim_run.h"

#include <simgrid/s4u.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <tuple>

#include "base/log.h"

namespace ibdt::sim {
namespace {

namespace sg4 = simgrid::s4u;
using collectives::AlltoallSchedule;
using collectives::ScheduledMessage;
using collectives::ScheduleRound;
using collectives::ScheduleTotals;

// What travels: enough to check it against the receiver's schedule.
struct Envelope {
  size_t round;
  int from;
  int64_t bytes;
};

struct CaseState {
  const SimCase* simCase = nullptr;
  std::vector<sg4::Mailbox*> inboxes;
  std::vector<ScheduleTotals> totals;
  std::string mismatch;
};

class RankActor {
 public:
  RankActor(CaseState& state, int rank) : state_(state), rank_(rank) {}

  void operator()() {
    collectives::ScheduleShape shape = state_.simCase->shape;
    shape.rank = rank_;
    Result<AlltoallSchedule> schedule = collectives::alltoallSchedule(state_.simCase->algorithm, shape);
    if (!schedule.isOk()) {
      state_.mismatch = schedule.status().message();
      return;
    }
    const messaging::CollectiveCost& cost = state_.simCase->onNode;
    if (cost.fixedNs > 0) sg4::this_actor::execute(cost.fixedNs);
    const size_t rounds = schedule->rounds.size();
    const size_t window = schedule->window == 0 ? rounds : static_cast<size_t>(schedule->window);
    std::vector<std::vector<sg4::CommPtr>> sends(rounds);
    size_t posted = 0;
    for (size_t done = 0; done < rounds; ++done) {
      while (posted < rounds && posted - done < window) {
        post(schedule->rounds[posted], posted, sends[posted]);
        ++posted;
      }
      complete(schedule->rounds[done], done);
      for (sg4::CommPtr& send : sends[done]) send->wait();
      sends[done].clear();
    }
  }

 private:
  void post(const ScheduleRound& round, size_t index, std::vector<sg4::CommPtr>& comms) {
    const messaging::CollectiveCost& cost = state_.simCase->onNode;
    ScheduleTotals& totals = state_.totals[static_cast<size_t>(rank_)];
    for (const ScheduledMessage& send : round.sends) {
      const double ns = cost.perMessageNs + cost.perByteNs * static_cast<double>(send.bytes);
      if (ns > 0) sg4::this_actor::execute(ns);
      auto* envelope = new Envelope{index, rank_, send.bytes};
      comms.push_back(state_.inboxes[static_cast<size_t>(send.peer)]->put_async(envelope, static_cast<uint64_t>(send.bytes)));
      ++totals.sentMessages;
      totals.sentBytes += send.bytes;
    }
  }

  // Takes messages from this rank's inbox until the round's are all there
  // (messages of later rounds wait in arrived_, as unexpected messages do).
  void complete(const ScheduleRound& round, size_t index) {
    ScheduleTotals& totals = state_.totals[static_cast<size_t>(rank_)];
    sg4::Mailbox* inbox = state_.inboxes[static_cast<size_t>(rank_)];
    for (const ScheduledMessage& recv : round.recvs) {
      auto key = std::make_pair(index, recv.peer);
      while (arrived_.find(key) == arrived_.end()) {
        std::unique_ptr<Envelope> envelope(inbox->get<Envelope>());
        arrived_.emplace(std::make_pair(envelope->round, envelope->from), envelope->bytes);
      }
      auto it = arrived_.find(key);
      if (it->second != recv.bytes && state_.mismatch.empty()) {
        state_.mismatch = "rank " + std::to_string(rank_) + " round " + std::to_string(index) + ": " +
                          std::to_string(it->second) + " bytes from rank " + std::to_string(recv.peer) + ", expected " +
                          std::to_string(recv.bytes);
      }
      ++totals.recvMessages;
      totals.recvBytes += it->second;
      arrived_.erase(it);
    }
  }

  CaseState& state_;
  int rank_;
  std::multimap<std::pair<size_t, int>, int64_t> arrived_;
};

// One case: p actors on the first nodes (rank r on node r / ranksPerNode),
// timed from their start to the last one's end.
SimResult runCase(const SimCase& simCase) {
  const int p = simCase.shape.ranks;
  CaseState state;
  state.simCase = &simCase;
  state.totals.resize(static_cast<size_t>(p));
  std::vector<sg4::ActorPtr> actors;
  const double start = sg4::Engine::get_clock();
  for (int r = 0; r < p; ++r) {
    sg4::Host* host = sg4::Host::by_name("node-" + std::to_string(r / simCase.shape.ranksPerNode));
    state.inboxes.push_back(sg4::Mailbox::by_name("rank-" + std::to_string(r)));
    actors.push_back(sg4::Actor::create("rank-" + std::to_string(r), host, RankActor(state, r)));
    state.inboxes.back()->set_receiver(actors.back());  // eager: sends start before the receive is posted
  }
  for (sg4::ActorPtr& actor : actors) actor->join();
  for (sg4::Mailbox* inbox : state.inboxes) inbox->set_receiver(nullptr);
  SimResult result;
  result.seconds = sg4::Engine::get_clock() - start;
  if (simCase.counters) result.ranks = std::move(state.totals);
  result.mismatch = std::move(state.mismatch);
  return result;
}

nlohmann::json toJson(const SimResult& result) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const ScheduleTotals& t : result.ranks) ranks.push_back({t.sentMessages, t.sentBytes, t.recvMessages, t.recvBytes});
  return {{"seconds", result.seconds}, {"mismatch", result.mismatch}, {"ranks", ranks}};
}

SimResult fromJson(const nlohmann::json& json) {
  SimResult result;
  result.seconds = json.at("seconds").get<double>();
  result.mismatch = json.at("mismatch").get<std::string>();
  for (const auto& t : json.at("ranks")) {
    result.ranks.push_back({t.at(0).get<int64_t>(), t.at(1).get<int64_t>(), t.at(2).get<int64_t>(),
                            t.at(3).get<int64_t>()});
  }
  return result;
}

// Above this many ranks a simulation needs smaller actor stacks (runChild).
constexpr int kLargeJobRanks = 16384;

// The child: one engine, the platform, a controller actor running the cases.
[[noreturn]] void runChild(int out, const PlatformSpec& platform, const std::vector<SimCase>& cases,
                           const std::vector<std::string>& config) {
  std::vector<std::string> args = {"ibdt-sim", "--log=root.thres:critical", "--cfg=contexts/stack-size:256",
                                    // SimGrid's default precision (1e-5) and 1e-9 both abort in its max-min
                                    // solver on some cases here; 1e-7 ran them (docs/simulator.md)
                                    "--cfg=maxmin/precision:1e-7"};
  int largest = 0;
  for (const SimCase& simCase : cases) largest = std::max(largest, simCase.shape.ranks);
  if (largest > kLargeJobRanks) {
    // One actor per rank: SimGrid's guard page per actor stack (two
    // mappings each) passes vm.max_map_count (65 530) near 32 768 actors,
    // and 64 KiB stacks hold the replay actors (docs/simulator.md).
    args.push_back("--cfg=contexts/guard-size:0");
    args.push_back("--cfg=contexts/stack-size:64");
  }
  for (const std::string& setting : config) args.push_back("--cfg=" + setting);
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  int argc = static_cast<int>(argv.size());
  sg4::Engine engine(&argc, argv.data());
  Status built = buildPlatform(platform);
  nlohmann::json results = nlohmann::json::array();
  if (built.isOk()) {
    sg4::Actor::create("controller", sg4::Host::by_name("node-0"), [&] {
      for (const SimCase& simCase : cases) results.push_back(toJson(runCase(simCase)));
    });
    engine.run();
  }
  const std::string text = built.isOk() ? results.dump() : "error:" + std::string(built.message());
  size_t at = 0;
  while (at < text.size()) {
    const ssize_t n = ::write(out, text.data() + at, text.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) _exit(3);
    at += static_cast<size_t>(n);
  }
  _exit(0);
}

Status checkCases(const PlatformSpec& platform, const std::vector<SimCase>& cases) {
  for (const SimCase& simCase : cases) {
    const collectives::ScheduleShape& s = simCase.shape;
    if (s.ranks < 1 || s.ranksPerNode < 1) return makeError(Code::kInvalidArgument, "sim: ", s.ranks, " ranks");
    const int64_t nodes = (int64_t{s.ranks} + s.ranksPerNode - 1) / s.ranksPerNode;
    if (nodes > platform.nodes) {
      return makeError(Code::kInvalidArgument, "sim: ", s.ranks, " ranks at ", s.ranksPerNode, " per node need ", nodes,
                       " nodes; the platform has ", platform.nodes);
    }
  }
  return Status::ok();
}

// One child process runs the cases; its results, or why it failed.
Result<std::vector<SimResult>> simulateOnce(const PlatformSpec& platform, const std::vector<SimCase>& cases,
                                            const std::vector<std::string>& config, bool& aborted) {
  aborted = false;
  int fds[2];
  if (::pipe(fds) != 0) return makeError(Code::kSystem, "sim: pipe: ", std::strerror(errno));
  const pid_t child = ::fork();
  if (child < 0) return makeError(Code::kSystem, "sim: fork: ", std::strerror(errno));
  if (child == 0) {
    ::close(fds[0]);
    runChild(fds[1], platform, cases, config);
  }
  ::close(fds[1]);
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
    return makeError(Code::kInternal, "sim: the SimGrid child failed (status ", status, ")");
  }
  if (text.rfind("error:", 0) == 0) return makeError(Code::kInvalidArgument, text.substr(6));
  nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_array() || json.size() != cases.size()) return makeError(Code::kInternal, "sim: bad results from the child");
  std::vector<SimResult> results;
  for (const auto& entry : json) results.push_back(fromJson(entry));
  return results;
}

}  // namespace

Result<std::vector<SimResult>> simulate(const PlatformSpec& platform, const std::vector<SimCase>& cases,
                                        const std::vector<std::string>& config) {
  IBDT_RETURN_IF_ERROR(checkCases(platform, cases));
  bool aborted = false;
  auto results = simulateOnce(platform, cases, config, aborted);
  const bool precisionGiven = std::any_of(config.begin(), config.end(), [](const std::string& setting) {
    return setting.rfind("maxmin/precision", 0) == 0;
  });
  if (results.isOk() || !aborted || precisionGiven) return results;
  // SimGrid's max-min solver aborts on rounding at some sizes, and which
  // precision avoids it depends on the case: 1e-7 (the default here) ran up
  // to 4096 ranks, 1e-5 the 65 536-rank Bruck (docs/simulator.md).
  IBDT_LOG(kWarn, "sim: SimGrid's max-min solver aborted (its report above); running the cases again at "
                  "maxmin/precision:1e-5");
  std::vector<std::string> retry = config;
  retry.push_back("maxmin/precision:1e-5");
  return simulateOnce(platform, cases, retry, aborted);
}

}  // namespace ibdt::sim
