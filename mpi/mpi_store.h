// mpi/mpi_store.h — a bootstrap::Store over an MPI intracommunicator, so a
// messaging Context can be created from inside an MPI program with no other
// launcher: commit() keeps the values, fence() exchanges what every rank
// committed since the last fence with MPI_Allgather(v) on a private
// duplicate of the communicator (never the user's, so no message of ours can
// match theirs). Placement: the communicator's rank and size; the node map
// from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED).
//
// MPI collectives have no deadline: fence() and get() ignore theirs. get()
// of a key no rank committed before the last fence is kNotFound at once.
// One thread at a time (the bridge holds its lock).
#pragma once

#include <mpi.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/staged_values.h"
#include "ibdt/store.h"

namespace ibdt::mpi {

class MpiStore final : public bootstrap::Store {
 public:
  // Collective over `comm` (an intracommunicator).
  static Result<std::unique_ptr<MpiStore>> create(MPI_Comm comm);
  ~MpiStore() override;

  std::string_view backend() const override { return "mpi"; }

 private:
  MpiStore(const bootstrap::Placement& placement, std::string_view jobId, MPI_Comm dup);
  Status doPut(std::string_view key, std::span<const uint8_t> value) override;
  Status doCommit() override;
  Status doFence(Deadline deadline) override;
  Result<bootstrap::Bytes> doGet(int rank, std::string_view key, Deadline deadline) override;

  MPI_Comm comm_;  // our duplicate
  bootstrap::StagedValues staged_;
  bootstrap::StagedValues::Batch committed_;  // committed, not yet fenced
  std::vector<std::map<std::string, bootstrap::Bytes, std::less<>>> visible_;  // by rank
};

}  // namespace ibdt::mpi
