// The PMIx backend: Open MPI's mpirun, Slurm's srun --mpi=pmix, PRRTE.
//
// Facts measured with PMIx 4.2.2 under Open MPI 4.1.4's mpirun that shape
// this code: values put with PMIX_REMOTE scope are invisible to processes on
// the same node, so everything is put PMIX_GLOBAL; PMIX_LOCAL_RANK answers
// only for our own rank while PMIX_LOCAL_SIZE, PMIX_NUM_NODES and
// PMIX_NODEID answer at the wildcard rank; PMIX_UNIV_SIZE counts slots, not
// processes, so the size is PMIX_JOB_SIZE; PMIx_Init without a launcher
// fails with PMIX_ERR_UNREACH.
#include <pmix.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>

#include "base/log.h"
#include "bootstrap/backends.h"

namespace ibdt::bootstrap {
namespace {

// Our keys live beside the MPI library's in the job's namespace.
constexpr std::string_view kKeyPrefix = "ibdt/";

Status pmixError(pmix_status_t rc, std::string_view call) {
  return makeError(Code::kSystem, call, " failed: ", PMIx_Error_string(rc), " (", rc, ")");
}

Result<uint32_t> integerOf(const pmix_value_t& value, std::string_view key) {
  switch (value.type) {
    case PMIX_UINT8: return value.data.uint8;
    case PMIX_UINT16: return value.data.uint16;
    case PMIX_UINT32: return value.data.uint32;
    case PMIX_UINT64: return static_cast<uint32_t>(value.data.uint64);
    case PMIX_INT: return static_cast<uint32_t>(value.data.integer);
    case PMIX_INT32: return static_cast<uint32_t>(value.data.int32);
    case PMIX_PROC_RANK: return value.data.rank;
    default: return makeError(Code::kProtocol, "PMIx key ", key, " has non-integer type ", PMIx_Data_type_string(value.type));
  }
}

// PMIx timeouts are whole seconds (0 means forever): round up.
int timeoutSeconds(Deadline deadline) {
  if (deadline.isNever()) return 0;
  auto seconds = std::chrono::ceil<std::chrono::seconds>(deadline.remaining()).count();
  return static_cast<int>(std::clamp<long long>(seconds, 1, 1 << 30));
}

class PmixStore final : public Store {
 public:
  PmixStore(const Placement& placement, const pmix_proc_t& self) : Store(placement), self_(self) {}
  ~PmixStore() override {
    pmix_status_t rc = PMIx_Finalize(nullptr, 0);
    if (rc != PMIX_SUCCESS) IBDT_LOG(kWarn, "PMIx_Finalize: ", PMIx_Error_string(rc));
  }

  std::string_view backend() const override { return "pmix"; }

  // Reads an integer attribute of `rank` (PMIX_RANK_WILDCARD for job/node data).
  static Result<uint32_t> queryInteger(const pmix_proc_t& self, pmix_rank_t rank, const char* key) {
    pmix_proc_t proc;
    PMIX_LOAD_PROCID(&proc, self.nspace, rank);
    pmix_value_t* value = nullptr;
    pmix_status_t rc = PMIx_Get(&proc, key, nullptr, 0, &value);
    if (rc != PMIX_SUCCESS) return pmixError(rc, strCat("PMIx_Get(", key, ")"));
    auto result = integerOf(*value, key);
    PMIX_VALUE_RELEASE(value);
    return result;
  }

 private:
  static Result<std::string> prefixed(std::string_view key) {
    std::string full = strCat(kKeyPrefix, key);
    if (full.size() > PMIX_MAX_KEYLEN) {
      return makeError(Code::kInvalidArgument, "store key '", key, "' is longer than PMIx allows (",
                       PMIX_MAX_KEYLEN - kKeyPrefix.size(), " bytes)");
    }
    return full;
  }

  Status doPut(std::string_view key, std::span<const uint8_t> bytes) override {
    IBDT_ASSIGN_OR_RETURN(std::string full, prefixed(key));
    pmix_value_t value;
    PMIX_VALUE_CONSTRUCT(&value);
    value.type = PMIX_BYTE_OBJECT;
    // PMIx_Put copies the value.
    value.data.bo.bytes = const_cast<char*>(reinterpret_cast<const char*>(bytes.data()));
    value.data.bo.size = bytes.size();
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, full.c_str(), &value);
    if (rc != PMIX_SUCCESS) return pmixError(rc, strCat("PMIx_Put('", key, "')"));
    return Status::ok();
  }

  Status doCommit() override {
    pmix_status_t rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS) return pmixError(rc, "PMIx_Commit");
    return Status::ok();
  }

  Status fenceWith(Deadline deadline, bool collect, std::string_view what) {
    pmix_info_t info[2];
    bool collectValue = collect;
    int timeout = timeoutSeconds(deadline);
    PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collectValue, PMIX_BOOL);
    PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &timeout, PMIX_INT);
    pmix_status_t rc = PMIx_Fence(nullptr, 0, info, 2);  // nullptr: every process of our namespace
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    if (rc == PMIX_ERR_TIMEOUT) {
      return makeError(Code::kTimeout, what, ": not every rank arrived within ", timeout,
                       " s (PMIx does not say which)");
    }
    if (rc != PMIX_SUCCESS) return pmixError(rc, strCat("PMIx_Fence (", what, ")"));
    return Status::ok();
  }

  Status doFence(Deadline deadline) override { return fenceWith(deadline, true, "fence"); }
  Status doBarrier(Deadline deadline) override { return fenceWith(deadline, false, "barrier"); }

  Result<Bytes> doGet(int rank, std::string_view key, Deadline deadline) override {
    IBDT_ASSIGN_OR_RETURN(std::string full, prefixed(key));
    pmix_proc_t proc;
    PMIX_LOAD_PROCID(&proc, self_.nspace, static_cast<pmix_rank_t>(rank));
    // First look only in the local cache (where a fence put everything),
    // then ask the server, which waits for the value up to the timeout.
    pmix_value_t* value = nullptr;
    bool optional = true;
    pmix_info_t info;
    PMIX_INFO_LOAD(&info, PMIX_OPTIONAL, &optional, PMIX_BOOL);
    pmix_status_t rc = PMIx_Get(&proc, full.c_str(), &info, 1, &value);
    PMIX_INFO_DESTRUCT(&info);
    if (rc != PMIX_SUCCESS && !deadline.expired()) {
      int timeout = timeoutSeconds(deadline);
      PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &timeout, PMIX_INT);
      rc = PMIx_Get(&proc, full.c_str(), &info, 1, &value);
      PMIX_INFO_DESTRUCT(&info);
    }
    if (rc == PMIX_ERR_NOT_FOUND || rc == PMIX_ERR_TIMEOUT) {
      return makeError(Code::kTimeout, "store get: rank ", rank, " did not put '", key, "' before the deadline (",
                       PMIx_Error_string(rc), ")");
    }
    if (rc != PMIX_SUCCESS) return pmixError(rc, strCat("PMIx_Get(rank ", rank, ", '", key, "')"));
    Result<Bytes> bytes = makeError(Code::kProtocol, "store get: rank ", rank, "'s '", key,
                                    "' is not a byte object but ", PMIx_Data_type_string(value->type));
    if (value->type == PMIX_BYTE_OBJECT) {
      const auto* data = reinterpret_cast<const uint8_t*>(value->data.bo.bytes);
      bytes = Bytes(data, data + value->data.bo.size);
    }
    PMIX_VALUE_RELEASE(value);
    return bytes;
  }

  pmix_proc_t self_;
};

}  // namespace

Result<std::unique_ptr<Store>> connectPmix(Deadline) {
  pmix_proc_t self;
  pmix_status_t rc = PMIx_Init(&self, nullptr, 0);
  if (rc != PMIX_SUCCESS) {
    return makeError(Code::kSystem, "PMIx_Init failed: ", PMIx_Error_string(rc),
                     rc == PMIX_ERR_UNREACH ? " (no PMIx server: start the job with mpirun or srun --mpi=pmix)" : "");
  }
  auto fail = [](Status status) {
    PMIx_Finalize(nullptr, 0);
    return status.withContext("joining the PMIx job");
  };
  Placement placement;
  placement.rank = static_cast<int>(self.rank);
  struct Query {
    pmix_rank_t rank;
    const char* key;
    int* out;
  } queries[] = {
      {PMIX_RANK_WILDCARD, PMIX_JOB_SIZE, &placement.size},
      {self.rank, PMIX_LOCAL_RANK, &placement.localRank},
      {PMIX_RANK_WILDCARD, PMIX_LOCAL_SIZE, &placement.localSize},
      {PMIX_RANK_WILDCARD, PMIX_NUM_NODES, &placement.numNodes},
      {PMIX_RANK_WILDCARD, PMIX_NODEID, &placement.nodeId},
  };
  for (const Query& query : queries) {
    auto value = PmixStore::queryInteger(self, query.rank, query.key);
    if (!value.isOk()) return fail(value.status());
    *query.out = static_cast<int>(*value);
  }
  if (placement.nodeId >= placement.numNodes || placement.localRank >= placement.localSize ||
      placement.rank >= placement.size) {
    return fail(makeError(Code::kProtocol, "inconsistent PMIx job data: rank ", placement.rank, "/", placement.size,
                          ", local ", placement.localRank, "/", placement.localSize, ", node ", placement.nodeId, "/",
                          placement.numNodes));
  }
  return std::unique_ptr<Store>(new PmixStore(placement, self));
}

}  // namespace ibdt::bootstrap
