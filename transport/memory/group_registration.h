// transport/memory/group_registration.h — Optimistic Group Registration
// (Wu, Wyckoff, Panda, 2004, section 4.4.1).
//
// A noncontiguous buffer is a list of blocks. Registering each block costs
// one fixed overhead per block; registering their whole extent pins pages
// that carry no data and may not even be mapped. OGR registers a few regions
// in between:
//   1. Plan: sort the blocks, round them out to pages, and walk the gaps. A
//      gap of g pages is spanned when pinning it costs no more than a
//      registration of its own (perPageNs * g <= fixedNs), else the group
//      ends there. Every gap is decided on its own, which is optimal for the
//      linear cost model: total = fixedNs * groups + perPageNs * pages.
//   2. Register each group optimistically, as if its gaps were mapped.
//   3. When that fails (a gap is not mapped, as ibv_reg_mr fails with
//      EFAULT), split the group at its largest gap and retry both halves. A
//      group without gaps that fails is a real error (a block itself is not
//      registrable).
// Registration goes through a RegistrationCache, so a buffer sent again hits
// the cache and pays nothing.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ibdt/fabric.h"
#include "ibdt/status.h"
#include "transport/memory/page_range.h"
#include "transport/memory/registration_cache.h"

namespace ibdt::memory {

struct Block {
  const void* address = nullptr;
  size_t length = 0;
};

struct GroupPlanOptions {
  fabric::RegistrationCost cost;  // see registrationCostOf()
  size_t pageSize = 4096;
  size_t maxRegionBytes = 0;      // 0: no limit on one region
};

// One planned region: blocks order[first .. last] of the address-sorted
// order, covering `range`.
struct PlannedGroup {
  PageRange range;
  uint32_t first = 0;
  uint32_t last = 0;
};

struct GroupPlan {
  std::vector<uint32_t> order;  // block indices sorted by address (zero-length blocks left out)
  std::vector<PageRange> pages; // pages of each block, by block index
  std::vector<PlannedGroup> groups;
};

// Step 1 alone (pure; for tests and for choosing a scheme by its cost).
// kOverflow when a block wraps around the address space.
Result<GroupPlan> planGroups(std::span<const Block> blocks, const GroupPlanOptions& options);

struct GroupRegistration {
  static constexpr uint32_t kNoRegion = UINT32_MAX;

  std::vector<RegionRef> regions;
  // For each input block, the index in `regions` of the region covering it;
  // kNoRegion for zero-length blocks, which need none.
  std::vector<uint32_t> regionOfBlock;
  uint32_t attempts = 0;  // registrations tried
  uint32_t splits = 0;    // groups split because their registration failed

  uint32_t lkey(size_t block) const { return regions[regionOfBlock[block]].lkey(); }
  uint64_t rkey(size_t block) const { return regions[regionOfBlock[block]].rkey(); }
};

// Steps 1-3: registers `blocks` with `access` through `cache`.
Result<GroupRegistration> registerGroups(RegistrationCache& cache, std::span<const Block> blocks, uint32_t access,
                                         const GroupPlanOptions& options);

}  // namespace ibdt::memory
