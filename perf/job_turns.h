// perf/job_turns.h — benchmark jobs of different sizes alive at once whose
// timed repetitions take turns (job A's, then job B's, ...), so that a slow
// or fast phase of the machine falls on every size alike instead of on
// whichever job ran then. The parent hands a rank its turn by a byte on that
// rank's pipe; the job's rank 0 answers with doubles on the job's pipe.
// Ranks that wait for a turn block in read(): they take no core.
#pragma once

#include <span>
#include <vector>

#include "ibdt/status.h"

namespace ibdt::perf {

class JobTurns {
 public:
  // Pipes for `jobs` jobs whose ranks 0 .. turnRanks - 1 take turns.
  static Result<JobTurns> create(int jobs, int turnRanks);
  JobTurns(JobTurns&& other) noexcept : jobs_(other.jobs_), turnRanks_(other.turnRanks_), fds_(std::move(other.fds_)) {
    other.fds_.clear();
  }
  JobTurns(const JobTurns&) = delete;
  JobTurns& operator=(const JobTurns&) = delete;
  ~JobTurns();

  // In a forked rank of `job`: closes every descriptor but this rank's own
  // ends, so that a parent that dies leaves it reading end of file.
  void keepOnly(int job, int rank);
  // In the parent, once every job is forked: closes the ranks' ends.
  void keepParentEnds();

  // Rank side: blocks until the parent gives `rank` of `job` a turn.
  Status awaitTurn(int job, int rank);
  // Rank 0's answer to the parent.
  Status answer(int job, std::span<const double> values);

  // Parent side.
  Status giveTurn(int job, int rank);
  Result<std::vector<double>> awaitAnswer(int job);

 private:
  JobTurns(int jobs, int turnRanks) : jobs_(jobs), turnRanks_(turnRanks) {}
  // Descriptor layout: per job, turnRanks pipes parent -> rank, then one
  // pipe rank 0 -> parent; each pipe [read end, write end].
  int& fd(int job, int pipe, int end) { return fds_[static_cast<size_t>((job * (turnRanks_ + 1) + pipe) * 2 + end)]; }

  int jobs_, turnRanks_;
  std::vector<int> fds_;
};

}  // namespace ibdt::perf
