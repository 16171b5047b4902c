// ibdt/store.h — the job's rendezvous: who am I, and a key-value store to
// exchange endpoint addresses.
//
// A Store is obtained once per process with connectStore(), which picks the
// backend from the environment: ibdt-run (the embedded launcher), PMIx
// (Open MPI's mpirun, Slurm's srun --mpi=pmix), PMI-1 (MPICH's mpiexec /
// Hydra) or, with no launcher at all, a singleton job of size 1.
// IBDT_BOOTSTRAP forces one (auto, ibdt-run, pmix, pmi1, singleton).
//
// Visibility: put() stages a value; commit() publishes this rank's staged
// values; after fence() (collective) every value any rank committed before
// it is visible to get(). Portable code always fences before reading
// another rank's keys. Keys are scoped to the job; names starting with
// "ibdt." are reserved for the library.
//
// Every method may be called from several threads at once. Calls that wait
// take a Deadline and fail with Code::kTimeout naming the rank or ranks that
// did not answer; a rank known to have died fails them with kPeerFailed.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ibdt/deadline.h"
#include "ibdt/status.h"

namespace ibdt::bootstrap {

using Bytes = std::vector<uint8_t>;

// Where a process sits in the job.
struct Placement {
  int rank = 0;
  int size = 1;
  int localRank = 0;
  int localSize = 1;
  int nodeId = 0;
  int numNodes = 1;
};

class Store {
 public:
  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Which backend serves this job: "ibdt-run", "pmix", "pmi1" or "singleton".
  virtual std::string_view backend() const = 0;
  int rank() const { return placement_.rank; }
  int size() const { return placement_.size; }
  // Rank among the processes of this node, and how many there are.
  int localRank() const { return placement_.localRank; }
  int localSize() const { return placement_.localSize; }
  // Node of this process, in [0, numNodes()).
  int nodeId() const { return placement_.nodeId; }
  int numNodes() const { return placement_.numNodes; }

  // Stages `value` under `key` for this rank (replacing an earlier one).
  Status put(std::string_view key, std::span<const uint8_t> value);
  Status put(std::string_view key, std::string_view value);
  // Publishes the values staged since the last commit.
  Status commit() { return doCommit(); }
  // Collective over all ranks: afterwards every value committed before it,
  // by any rank, is visible.
  Status fence(Deadline deadline) { return doFence(deadline); }
  // The value `rank` put under `key`; waits until the deadline for it to
  // become visible.
  Result<Bytes> get(int rank, std::string_view key, Deadline deadline);
  // Collective over all ranks; no data.
  Status barrier(Deadline deadline) { return doBarrier(deadline); }
  // Collective: every rank contributes `value`; returns all of them by rank.
  Result<std::vector<Bytes>> allgather(std::span<const uint8_t> value, Deadline deadline);

 protected:
  explicit Store(const Placement& placement) : placement_(placement) {}
  // Backends implement these; arguments are already checked (rank in range,
  // key not empty).
  virtual Status doPut(std::string_view key, std::span<const uint8_t> value) = 0;
  virtual Status doCommit() = 0;
  virtual Status doFence(Deadline deadline) = 0;
  virtual Result<Bytes> doGet(int rank, std::string_view key, Deadline deadline) = 0;
  virtual Status doBarrier(Deadline deadline) { return doFence(deadline); }

 private:
  Placement placement_;
  std::atomic<uint64_t> allgatherRound_{0};
};

// Connects to the job's launcher (see above). Fails with a clear error when
// the environment names a launcher that cannot be reached.
Result<std::unique_ptr<Store>> connectStore();

}  // namespace ibdt::bootstrap
