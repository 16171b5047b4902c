// transport/fabric/verbs/verbs_memory_region.h — an ibv_mr as a MemoryRegion.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "ibdt/fabric.h"

namespace ibdt::fabric::verbs {

class VerbsMemoryRegion final : public MemoryRegion {
 public:
  // Registers [address, address + length). `ownedMapping`: the region also
  // owns that anonymous mapping and unmaps it after deregistration.
  // `windows`: memory windows may be bound to it (IBV_ACCESS_MW_BIND).
  static Result<std::unique_ptr<MemoryRegion>> create(ibv_pd* pd, const std::string& device, void* address,
                                                      size_t length, uint32_t access, bool ownedMapping,
                                                      bool windows = false);
  ~VerbsMemoryRegion() override;
  ibv_mr* handle() const { return mr_; }
  // A local-only registration of exactly [address, address + length) of
  // this region that memory windows may be bound to, registered on first
  // use and kept until the region is destroyed. Windows are bound over it
  // rather than over the whole region because rdma_rxe checks a window
  // key's range against the memory region under the window, not against
  // the window (docs/security.md); an HCA checks the window itself.
  Result<ibv_mr*> windowTarget(void* address, size_t length, const std::string& device) const;

 private:
  VerbsMemoryRegion(ibv_mr* mr, uint32_t access, bool ownedMapping);
  ibv_mr* mr_;
  bool ownedMapping_;
  mutable std::map<std::pair<uintptr_t, size_t>, ibv_mr*> windowTargets_;
};

// Anonymous, page-aligned, zeroed memory of at least `length` bytes, registered.
Result<std::unique_ptr<MemoryRegion>> allocateRegistered(ibv_pd* pd, const std::string& device, size_t length,
                                                         uint32_t access, bool windows);

// ibv access flags for Access bits (callers ensure remote write comes with local write).
int toIbvAccess(uint32_t access);

}  // namespace ibdt::fabric::verbs
