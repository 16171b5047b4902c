#include "transport/fabric/verbs/verbs_memory_region.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "transport/fabric/verbs/verbs_status.h"

namespace ibdt::fabric::verbs {
namespace {
constexpr uint32_t kKnownAccess = kLocalWrite | kRemoteWrite | kRemoteRead;
}

int toIbvAccess(uint32_t access) {
  int flags = 0;
  if (access & kLocalWrite) flags |= IBV_ACCESS_LOCAL_WRITE;
  if (access & kRemoteWrite) flags |= IBV_ACCESS_REMOTE_WRITE;
  if (access & kRemoteRead) flags |= IBV_ACCESS_REMOTE_READ;
  return flags;
}

Result<std::unique_ptr<MemoryRegion>> VerbsMemoryRegion::create(ibv_pd* pd, const std::string& device, void* address,
                                                               size_t length, uint32_t access, bool ownedMapping,
                                                               bool windows) {
  if ((access & ~kKnownAccess) != 0) {
    return makeError(Code::kInvalidArgument, device, ": registerMemory: unknown access bits 0x", std::hex,
                     access & ~kKnownAccess);
  }
  if ((access & kRemoteWrite) != 0 && (access & kLocalWrite) == 0) {
    return makeError(Code::kInvalidArgument, device, ": registerMemory: kRemoteWrite requires kLocalWrite (as ibv_reg_mr)");
  }
  if (address == nullptr || length == 0) {
    return makeError(Code::kInvalidArgument, device, ": registerMemory: empty range (address ", address, ", length ",
                     length, ")");
  }
  ibv_mr* mr = ibv_reg_mr(pd, address, length, toIbvAccess(access) | (windows ? IBV_ACCESS_MW_BIND : 0));
  if (mr == nullptr) {
    int error = errno;
    // EFAULT: part of the range is not mapped; optimistic group registration relies on telling this apart.
    if (error == EFAULT) {
      return makeError(Code::kInvalidArgument, device, ": ibv_reg_mr(", address, ", ", length,
                       " bytes) failed: part of the range is not mapped (EFAULT)");
    }
    return verbsCallError(strCat("ibv_reg_mr(", address, ", ", length, " bytes)"), error, device);
  }
  return std::unique_ptr<MemoryRegion>(new VerbsMemoryRegion(mr, access, ownedMapping));
}

VerbsMemoryRegion::VerbsMemoryRegion(ibv_mr* mr, uint32_t access, bool ownedMapping)
    : MemoryRegion(mr->addr, mr->length, mr->lkey, mr->rkey, access), mr_(mr), ownedMapping_(ownedMapping) {}

Result<ibv_mr*> VerbsMemoryRegion::windowTarget(void* address, size_t length, const std::string& device) const {
  auto key = std::make_pair(reinterpret_cast<uintptr_t>(address), length);
  if (auto found = windowTargets_.find(key); found != windowTargets_.end()) return found->second;
  ibv_mr* mr = ibv_reg_mr(mr_->pd, address, length, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
  if (mr == nullptr) {
    return verbsCallError(strCat("ibv_reg_mr(", address, ", ", length, " bytes) for memory windows"), errno, device);
  }
  windowTargets_.emplace(key, mr);
  return mr;
}

VerbsMemoryRegion::~VerbsMemoryRegion() {
  for (auto& [range, mr] : windowTargets_) {
    if (int rc = ibv_dereg_mr(mr); rc != 0) {
      IBDT_LOG(kWarn, "ibv_dereg_mr(window target of ", range.second, " bytes) failed: ", std::strerror(rc));
    }
  }
  void* address = mr_->addr;
  size_t length = mr_->length;
  if (int rc = ibv_dereg_mr(mr_); rc != 0) {
    IBDT_LOG(kWarn, "ibv_dereg_mr(", address, ", ", length, " bytes) failed: ", std::strerror(rc));
  }
  if (ownedMapping_) munmap(address, length);
}

Result<std::unique_ptr<MemoryRegion>> allocateRegistered(ibv_pd* pd, const std::string& device, size_t length,
                                                         uint32_t access, bool windows) {
  if (length == 0) return makeError(Code::kInvalidArgument, device, ": allocateMemory: length 0");
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (length > SIZE_MAX - page) return makeError(Code::kOverflow, device, ": allocateMemory: length ", length);
  size_t rounded = (length + page - 1) / page * page;
  void* memory = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) {
    return makeError(Code::kResource, device, ": allocateMemory: mmap(", rounded, " bytes) failed: ",
                     std::strerror(errno));
  }
  auto region = VerbsMemoryRegion::create(pd, device, memory, rounded, access, true, windows);
  if (!region.isOk()) munmap(memory, rounded);
  return region;
}

}  // namespace ibdt::fabric::verbs
