#include "perf/soak_job.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <thread>

#include "ibdt/collectives.h"
#include "ibdt/fabric.h"
#include "perf/forked_ranks.h"
#include "support/soak_round.h"

namespace ibdt::perf {
namespace {

using Clock = std::chrono::steady_clock;
using collectives::testing::SoakTally;

enum : int32_t { kStarting = 0, kRunning = 1, kRoundsEnded = 2 };

// One per rank, in an anonymous shared mapping the forked ranks inherit.
struct SharedRecord {
  std::atomic<int32_t> state{kStarting};  // lock-free, so it works across processes
  uint64_t rounds = 0;
  int64_t bytesChecked = 0;
  Code code = Code::kOk;
  bool wrong = false;
  char message[240] = {};
  char provider[16] = {};  // what the job's provider option opened ("auto": shm or verbs)
};
static_assert(std::atomic<int32_t>::is_always_lock_free);

class SharedRecords {
 public:
  explicit SharedRecords(int ranks) : bytes_(sizeof(SharedRecord) * static_cast<size_t>(ranks)) {
    void* at = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (at == MAP_FAILED) return;
    records_ = static_cast<SharedRecord*>(at);
    for (int r = 0; r < ranks; ++r) new (&records_[r]) SharedRecord();
  }
  ~SharedRecords() {
    if (records_ != nullptr) munmap(records_, bytes_);
  }
  SharedRecords(const SharedRecords&) = delete;
  SharedRecords& operator=(const SharedRecords&) = delete;
  SharedRecord* get() const { return records_; }

 private:
  size_t bytes_;
  SharedRecord* records_ = nullptr;
};

void write(SharedRecord& record, const SoakTally& tally) {
  record.rounds = tally.rounds;
  record.bytesChecked = tally.bytesChecked;
  record.code = tally.status.code();
  record.wrong = !tally.wrong.empty();
  const std::string message = record.wrong ? tally.wrong : tally.status.toString();
  std::snprintf(record.message, sizeof record.message, "%s", message.c_str());
  record.state.store(kRoundsEnded, std::memory_order_release);
}

// A rank's life: create, meet, rounds, then teardown (a clean close after a
// mix; after an error the Context is dropped, as an aborting code would).
int soakRank(messaging::Bootstrap& bootstrap, const SoakJobSpec& spec, const std::string& jobTag,
             SharedRecord& record) {
  SoakTally tally;
  auto fail = [&](const Status& status) {
    tally.status = status;
    write(record, tally);
    return 0;
  };
  auto domain = fabric::openDomain(spec.provider, {jobTag, ""});
  if (!domain.isOk()) return fail(domain.status());
  std::snprintf(record.provider, sizeof record.provider, "%s", (*domain)->caps().provider.c_str());
  auto context = messaging::Context::create(**domain, bootstrap, collectives::testing::soakOptions());
  if (!context.isOk()) return fail(context.status());
  auto comm = collectives::Communicator::create(**context);
  if (!comm.isOk()) return fail(comm.status());
  if (Status met = bootstrap.allgather({}).status(); !met.isOk()) return fail(met);
  record.state.store(kRunning, std::memory_order_release);
  const std::chrono::milliseconds roundBound = spec.bound;
  tally = spec.kill ? collectives::testing::soakUntilFailure(**context, **comm, UINT64_MAX, spec.seed, roundBound)
                    : collectives::testing::soakUntil(**context, **comm, Clock::now() + spec.mixFor, spec.seed,
                                                      roundBound);
  write(record, tally);
  comm->reset();
  if (tally.failed()) return 0;  // dropped unclosed, as a code that aborts on an error
  Status closed = (*context)->close(Deadline::after(spec.bound));
  if (!closed.isOk()) {
    tally.status = closed.withContext("close after the rounds");
    write(record, tally);
  }
  return 0;
}

SoakRankEnd endOf(const SharedRecord& record) {
  SoakRankEnd end;
  end.roundsEnded = record.state.load(std::memory_order_acquire) == kRoundsEnded;
  end.provider = std::string(record.provider, strnlen(record.provider, sizeof record.provider));
  if (!end.roundsEnded) return end;
  end.rounds = record.rounds;
  end.bytesChecked = record.bytesChecked;
  end.code = record.code;
  end.wrong = record.wrong;
  end.message = std::string(record.message, strnlen(record.message, sizeof record.message));
  return end;
}

// Kill mode: waits until every rank runs its rounds (or one ended early),
// unless the kills come during creation; then SIGKILLs each victim at its
// delay from there. Returns when the last one was killed.
Clock::time_point killVictims(const SoakJobSpec& spec, const std::vector<pid_t>& pids, SharedRecord* records) {
  if (!spec.duringCreate) {
    const auto startBy = Clock::now() + spec.bound;
    auto running = [&] {
      return std::all_of(records, records + spec.ranks, [](const SharedRecord& r) { return r.state.load() != kStarting; });
    };
    while (!running() && Clock::now() < startBy) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const auto from = Clock::now();
  std::vector<SoakJobSpec::Victim> victims = spec.victims;
  std::sort(victims.begin(), victims.end(), [](const auto& a, const auto& b) { return a.delay < b.delay; });
  for (const SoakJobSpec::Victim& victim : victims) {
    std::this_thread::sleep_until(from + victim.delay);
    kill(pids[static_cast<size_t>(victim.rank)], SIGKILL);
  }
  return Clock::now();
}

}  // namespace

Result<SoakJobResult> runSoakJob(const SoakJobSpec& spec, const std::string& jobTag) {
  SharedRecords shared(spec.ranks);
  SharedRecord* records = shared.get();
  if (records == nullptr) return makeError(Code::kSystem, "soak: mmap of the rank records: ", std::strerror(errno));
  const auto started = Clock::now();
  IBDT_ASSIGN_OR_RETURN(std::vector<pid_t> pids, forkRankProcesses(spec.ranks, [&](messaging::Bootstrap& bootstrap) {
                          return soakRank(bootstrap, spec, jobTag, records[bootstrap.rank]);
                        }));
  SoakJobResult result;
  result.ranks.resize(pids.size());
  Clock::time_point killed = spec.kill ? killVictims(spec, pids, records) : started;
  const auto giveUp = (spec.kill ? killed : started + spec.mixFor) + 2 * spec.bound;
  size_t left = pids.size();
  std::vector<bool> reaped(pids.size(), false);
  while (left > 0) {
    const bool late = Clock::now() >= giveUp;
    for (size_t r = 0; r < pids.size(); ++r) {
      if (reaped[r]) continue;
      if (late) {  // hung: its own deadlines did not end it
        result.ranks[r].hung = true;
        kill(pids[r], SIGKILL);
      }
      int status = 0;
      pid_t got = waitpid(pids[r], &status, late ? 0 : WNOHANG);
      if (got == 0 || (got < 0 && errno == EINTR)) continue;
      const bool hung = result.ranks[r].hung;
      result.ranks[r] = endOf(records[r]);
      result.ranks[r].hung = hung;
      result.ranks[r].waitStatus = status;
      result.ranks[r].secondsAfterKill = std::chrono::duration<double>(Clock::now() - killed).count();
      reaped[r] = true;
      --left;
    }
    // Reaping promptly matters: a dead rank's peers see it gone at once (pidfd).
    if (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return result;
}

}  // namespace ibdt::perf
