// mpi/alltoall_call.h — one blocking MPI_Alltoall on ibdt, without any
// agreement between the ranks per call.
//
// Every plan the bridge builds for a blocking alltoall takes the
// communicator's pinned bridge tag (Communicator::pinPlanTag): the calls run
// one at a time, each to completion, and runs on one tag match in order, so
// each rank may build a new plan or start a cached one as it likes (buffers
// reallocated on one rank only, a plan evicted on one rank only) and the
// messages still pair up. The wire of a run does not depend on whether its
// plan is new: alltoall checks each message's signature as it arrives, so a
// mismatch fails that receive with an error naming the peer on every run.
//
// The choice between ibdt and MPI is made locally and is the same on every
// rank of a correct program: a type whose layout ibdt cannot express
// (negative extent), on one side, both sides or with MPI_IN_PLACE, is
// staged through PMPI_Pack / PMPI_Unpack against a dense type of its own
// signature (signatureType), so that rank still takes part; only a call
// with a signature ibdt has no basic type for goes to MPI, and that fails
// on every rank alike. The hierarchical algorithm, whose plans split
// the communicator at init (collective), keeps one collective vote per call.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ibdt/collectives.h"
#include "ibdt/datatype.h"

namespace ibdt::mpi {

struct CommState;

// The reserved tag of every blocking call's data (alltoall and alltoallv:
// they run one at a time, each to completion, so they pair up in call order).
inline constexpr int32_t kBlockingAlltoallTag = collectives::Communicator::kFirstReservedPlanTag;

// Every plan built while this lives takes the blocking calls' tag.
class PinnedTag {
 public:
  explicit PinnedTag(collectives::Communicator& comm) : comm_(comm) { comm_.pinPlanTag(kBlockingAlltoallTag); }
  ~PinnedTag() { comm_.unpinPlanTag(); }
  PinnedTag(const PinnedTag&) = delete;
  PinnedTag& operator=(const PinnedTag&) = delete;

 private:
  collectives::Communicator& comm_;
};

// Starts `plan` and waits for it.
Status runPlan(collectives::Plan& plan);

struct AlltoallArgs {
  const void* sendbuf;
  int sendcount;
  MPI_Datatype sendtype;
  void* recvbuf;
  int recvcount;
  MPI_Datatype recvtype;
  bool operator==(const AlltoallArgs&) const = default;
};

// The plans of a communicator's recent blocking alltoalls, by arguments.
struct AlltoallCache {
  static constexpr size_t kMaxPlans = 8;
  struct Key {
    const void* sendbuf = nullptr;
    int sendcount = 0;
    uint32_t sendId = 0, sendVersion = 0;
    void* recvbuf = nullptr;
    int recvcount = 0;
    uint32_t recvId = 0, recvVersion = 0;
    bool operator==(const Key&) const = default;
  };
  struct Entry {
    Key key;
    collectives::Plan plan;
    uint64_t lastUse = 0;
  };
  // The plan for `key`, or null.
  collectives::Plan* find(const Key& key);
  // Keeps `plan` for `key`, evicting the least recently used beyond kMaxPlans.
  collectives::Plan& insert(const Key& key, collectives::Plan plan);
  void clear() {
    entries.clear();
    last = {};
  }
  // The plan of the previous call if `args` repeat its MPI arguments and no
  // converted type was freed since (the handles then name the same types):
  // a repeated call skips the conversions and the key (the loop of an
  // application's timestep).
  collectives::Plan* repeated(const AlltoallArgs& args, uint64_t typesFreed) const {
    return last.plan != nullptr && last.typesFreed == typesFreed && last.args == args ? last.plan : nullptr;
  }
  void remember(const AlltoallArgs& args, uint64_t typesFreed, collectives::Plan* plan) {
    last = {args, typesFreed, plan};
  }

  struct Last {
    AlltoallArgs args{};
    uint64_t typesFreed = 0;
    collectives::Plan* plan = nullptr;  // into `entries`: reset by insert() and clear()
  };
  Last last;
  std::vector<Entry> entries;
  uint64_t clock = 0;
  uint64_t built = 0;  // plans built (tests: a loop of identical calls builds one)
};

// Runs the alltoall on ibdt. Returns false, with `why` set, when it goes to
// MPI instead (no type converts); otherwise `status` is ibdt's outcome.
bool runOnIbdt(CommState& state, const AlltoallArgs& args, MPI_Comm comm, Status& status, std::string& why);

}  // namespace ibdt::mpi
