// transport/fabric/verbs/verbs_memory_region.h — an ibv_mr as a MemoryRegion.
#pragma once

#include <infiniband/verbs.h>

#include <memory>
#include <string>

#include "ibdt/fabric.h"

namespace ibdt::fabric::verbs {

class VerbsMemoryRegion final : public MemoryRegion {
 public:
  // Registers [address, address + length). `ownedMapping`: the region also
  // owns that anonymous mapping and unmaps it after deregistration.
  static Result<std::unique_ptr<MemoryRegion>> create(ibv_pd* pd, const std::string& device, void* address,
                                                      size_t length, uint32_t access, bool ownedMapping);
  ~VerbsMemoryRegion() override;

 private:
  VerbsMemoryRegion(ibv_mr* mr, uint32_t access, bool ownedMapping);
  ibv_mr* mr_;
  bool ownedMapping_;
};

// Anonymous, page-aligned, zeroed memory of at least `length` bytes, registered.
Result<std::unique_ptr<MemoryRegion>> allocateRegistered(ibv_pd* pd, const std::string& device, size_t length,
                                                         uint32_t access);

// ibv access flags for Access bits (callers ensure remote write comes with local write).
int toIbvAccess(uint32_t access);

}  // namespace ibdt::fabric::verbs
