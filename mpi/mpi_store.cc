// A Store whose fence is an MPI_Allgatherv of the values committed since.
#include "mpi/mpi_store.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace ibdt::mpi {
namespace {

void appendU32(bootstrap::Bytes& out, size_t value) {
  const uint32_t v = static_cast<uint32_t>(value);
  const auto* bytes = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), bytes, bytes + sizeof v);
}

// key and value lengths, each followed by its bytes, for every entry.
bootstrap::Bytes encode(const bootstrap::StagedValues::Batch& batch) {
  bootstrap::Bytes out;
  for (const auto& [key, value] : batch) {
    appendU32(out, key.size());
    out.insert(out.end(), key.begin(), key.end());
    appendU32(out, value.size());
    out.insert(out.end(), value.begin(), value.end());
  }
  return out;
}

Status decode(const uint8_t* data, size_t size, std::map<std::string, bootstrap::Bytes, std::less<>>& into) {
  size_t at = 0;
  auto take = [&](size_t& length) {
    if (size - at < sizeof(uint32_t)) return false;
    uint32_t v = 0;
    std::memcpy(&v, data + at, sizeof v);
    at += sizeof v;
    length = v;
    return size - at >= length;
  };
  while (at < size) {
    size_t keyLength = 0, valueLength = 0;
    if (!take(keyLength)) return makeError(Code::kProtocol, "mpi store: truncated key in a fence");
    std::string key(reinterpret_cast<const char*>(data + at), keyLength);
    at += keyLength;
    if (!take(valueLength)) return makeError(Code::kProtocol, "mpi store: truncated value in a fence");
    into.insert_or_assign(std::move(key), bootstrap::Bytes(data + at, data + at + valueLength));
    at += valueLength;
  }
  return Status::ok();
}

// Where this rank runs: ranks sharing memory form a node, named by the
// lowest communicator rank on it; nodes are numbered in that rank's order.
Status placeOnNodes(MPI_Comm comm, bootstrap::Placement& placement) {
  MPI_Comm local = MPI_COMM_NULL;
  if (PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local) != MPI_SUCCESS) {
    return makeError(Code::kSystem, "mpi store: MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) failed");
  }
  PMPI_Comm_rank(local, &placement.localRank);
  PMPI_Comm_size(local, &placement.localSize);
  int leader = placement.rank;
  PMPI_Bcast(&leader, 1, MPI_INT, 0, local);
  PMPI_Comm_free(&local);
  std::vector<int> leaders(static_cast<size_t>(placement.size));
  if (PMPI_Allgather(&leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, comm) != MPI_SUCCESS) {
    return makeError(Code::kSystem, "mpi store: MPI_Allgather of node leaders failed");
  }
  std::sort(leaders.begin(), leaders.end());
  leaders.erase(std::unique(leaders.begin(), leaders.end()), leaders.end());
  placement.numNodes = static_cast<int>(leaders.size());
  placement.nodeId = static_cast<int>(std::lower_bound(leaders.begin(), leaders.end(), leader) - leaders.begin());
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<MpiStore>> MpiStore::create(MPI_Comm comm) {
  MPI_Comm dup = MPI_COMM_NULL;
  if (PMPI_Comm_dup(comm, &dup) != MPI_SUCCESS) return makeError(Code::kSystem, "mpi store: MPI_Comm_dup failed");
  bootstrap::Placement placement;
  PMPI_Comm_rank(dup, &placement.rank);
  PMPI_Comm_size(dup, &placement.size);
  if (Status placed = placeOnNodes(dup, placement); !placed.isOk()) {
    PMPI_Comm_free(&dup);
    return placed;
  }
  // Names the job as rank 0 sees it: its pid and how many stores it made.
  static int made = 0;
  int name[2] = {static_cast<int>(getpid()), made++};
  PMPI_Bcast(name, 2, MPI_INT, 0, dup);
  return std::unique_ptr<MpiStore>(new MpiStore(placement, strCat("mpi-", name[0], "-", name[1]), dup));
}

MpiStore::MpiStore(const bootstrap::Placement& placement, std::string_view jobId, MPI_Comm dup)
    : Store(placement, jobId), comm_(dup), visible_(static_cast<size_t>(placement.size)) {}

MpiStore::~MpiStore() {
  int finalized = 0;
  PMPI_Finalized(&finalized);
  if (!finalized) PMPI_Comm_free(&comm_);
}

Status MpiStore::doPut(std::string_view key, std::span<const uint8_t> value) {
  staged_.put(key, value);
  return Status::ok();
}

Status MpiStore::doCommit() {
  for (auto& [key, value] : staged_.take()) committed_.insert_or_assign(key, std::move(value));
  return Status::ok();
}

Status MpiStore::doFence(Deadline) {
  const bootstrap::Bytes mine = encode(committed_);
  committed_.clear();
  const int ranks = size();
  const int myLength = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<size_t>(ranks)), offsets(static_cast<size_t>(ranks));
  if (PMPI_Allgather(&myLength, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm_) != MPI_SUCCESS) {
    return makeError(Code::kSystem, "mpi store: fence: MPI_Allgather failed");
  }
  int64_t total = 0;
  for (int r = 0; r < ranks; ++r) {
    offsets[static_cast<size_t>(r)] = static_cast<int>(total);
    total += lengths[static_cast<size_t>(r)];
  }
  if (total > INT32_MAX) return makeError(Code::kOverflow, "mpi store: fence: ", total, " bytes in one fence");
  bootstrap::Bytes all(static_cast<size_t>(total));
  if (PMPI_Allgatherv(mine.data(), myLength, MPI_BYTE, all.data(), lengths.data(), offsets.data(), MPI_BYTE,
                      comm_) != MPI_SUCCESS) {
    return makeError(Code::kSystem, "mpi store: fence: MPI_Allgatherv failed");
  }
  for (int r = 0; r < ranks; ++r) {
    const size_t at = static_cast<size_t>(offsets[static_cast<size_t>(r)]);
    IBDT_RETURN_IF_ERROR(decode(all.data() + at, static_cast<size_t>(lengths[static_cast<size_t>(r)]),
                                visible_[static_cast<size_t>(r)]));
  }
  return Status::ok();
}

Result<bootstrap::Bytes> MpiStore::doGet(int rank, std::string_view key, Deadline) {
  const auto& values = visible_[static_cast<size_t>(rank)];
  if (auto found = values.find(key); found != values.end()) return found->second;
  return makeError(Code::kNotFound, "mpi store: rank ", rank, " committed no '", key,
                   "' before the last fence (a fence is collective over the communicator)");
}

}  // namespace ibdt::mpi
