// perf/soak_job.h — one job of `ibdt-bench soak` (issue 17): N forked ranks
// over a real provider (shm by default) run the soak's rounds
// (tests/support/soak_round.h), either for a given time (mix) or until they
// fail (kill: the bench SIGKILLs one or more ranks once all are running, or
// while they are still creating their contexts). The bench
// process only supervises: it reaps every rank, and one that has not ended
// within the bound is killed and counted as hung.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "ibdt/status.h"

namespace ibdt::perf {

struct SoakJobSpec {
  int ranks = 4;
  std::string provider = "auto";
  uint64_t seed = 0;
  std::chrono::milliseconds mixFor{0};     // mix: rounds until rank 0 has run this long
  bool kill = false;                       // kill: rounds until failure; the victims are SIGKILLed
  struct Victim {
    int rank = 0;
    std::chrono::milliseconds delay{0};    // after every rank runs its rounds, or after the fork (duringCreate)
  };
  std::vector<Victim> victims;
  bool duringCreate = false;               // kill while the ranks open, connect and create (not waiting for rounds)
  std::chrono::seconds bound{30};          // every wait of a round; a rank alive 2 x bound later is hung
};

// How a rank ended: what it wrote about itself (in memory shared with the
// bench) and how the bench saw it end.
struct SoakRankEnd {
  std::string provider;           // the provider it opened (empty if it did not get that far)
  bool roundsEnded = false;       // it got as far as writing what follows
  uint64_t rounds = 0;
  int64_t bytesChecked = 0;
  Code code = Code::kOk;          // the library's error that ended its rounds
  bool wrong = false;             // a byte differed from what its sender meant
  std::string message;            // the error or the wrong byte
  int waitStatus = 0;
  bool hung = false;              // still alive at the bound: killed by the bench
  double secondsAfterKill = 0;    // kill mode: reaped this long after the last victim's SIGKILL
};

struct SoakJobResult {
  std::vector<SoakRankEnd> ranks;
  double seconds = 0;  // from fork to the last rank reaped
};

// Runs one job; fails only when the job could not be started.
Result<SoakJobResult> runSoakJob(const SoakJobSpec& spec, const std::string& jobTag);

}  // namespace ibdt::perf
