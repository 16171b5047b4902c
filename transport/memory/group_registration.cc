#include "transport/memory/group_registration.h"

#include <algorithm>
#include <numeric>

namespace ibdt::memory {
namespace {

// Pages between the end of one block's pages and the start of the next's.
size_t gapPages(const PageRange& before, const PageRange& after, size_t pageSize) {
  return after.begin > before.end ? (after.begin - before.end) / pageSize : 0;
}

}  // namespace

Result<GroupPlan> planGroups(std::span<const Block> blocks, const GroupPlanOptions& options) {
  if (blocks.size() >= UINT32_MAX) return makeError(Code::kOverflow, "group registration: too many blocks");
  GroupPlan plan;
  plan.pages.resize(blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (wrapsAround(blocks[i].address, blocks[i].length, options.pageSize)) {
      return makeError(Code::kOverflow, "group registration: block ", i, " at ", blocks[i].address, " + ",
                       blocks[i].length, " wraps around");
    }
    if (blocks[i].length == 0) continue;
    plan.pages[i] = pagesOf(blocks[i].address, blocks[i].length, options.pageSize);
    plan.order.push_back(static_cast<uint32_t>(i));
  }
  std::sort(plan.order.begin(), plan.order.end(),
            [&](uint32_t a, uint32_t b) { return plan.pages[a].begin < plan.pages[b].begin; });

  // Span a gap of g pages while perPageNs * g <= fixedNs.
  const auto& cost = options.cost;
  for (uint32_t pos = 0; pos < plan.order.size(); ++pos) {
    const PageRange& next = plan.pages[plan.order[pos]];
    if (!plan.groups.empty()) {
      PlannedGroup& group = plan.groups.back();
      double gapCost = cost.perPageNs * static_cast<double>(gapPages(group.range, next, options.pageSize));
      uintptr_t end = std::max(group.range.end, next.end);
      bool fits = options.maxRegionBytes == 0 || end - group.range.begin <= options.maxRegionBytes;
      if (gapCost <= cost.fixedNs && fits) {
        group.range.end = end;
        group.last = pos;
        continue;
      }
    }
    plan.groups.push_back({next, pos, pos});
  }
  return plan;
}

Result<GroupRegistration> registerGroups(RegistrationCache& cache, std::span<const Block> blocks, uint32_t access,
                                         const GroupPlanOptions& options) {
  IBDT_ASSIGN_OR_RETURN(GroupPlan plan, planGroups(blocks, options));
  GroupRegistration result;
  result.regionOfBlock.assign(blocks.size(), GroupRegistration::kNoRegion);

  std::vector<PlannedGroup> work(plan.groups.rbegin(), plan.groups.rend());  // a stack, in address order
  while (!work.empty()) {
    PlannedGroup group = work.back();
    work.pop_back();
    ++result.attempts;
    auto region = cache.acquire(reinterpret_cast<void*>(group.range.begin), group.range.bytes(), access);
    if (region.isOk()) {
      auto index = static_cast<uint32_t>(result.regions.size());
      result.regions.push_back(std::move(region).value());
      for (uint32_t pos = group.first; pos <= group.last; ++pos) result.regionOfBlock[plan.order[pos]] = index;
      continue;
    }
    // Split at the widest gap, if there is one; the pages there may be unmapped.
    uint32_t splitAfter = group.last;
    size_t widest = 0;
    uintptr_t reach = plan.pages[plan.order[group.first]].end;
    for (uint32_t pos = group.first; pos < group.last; ++pos) {
      reach = std::max(reach, plan.pages[plan.order[pos]].end);
      size_t gap = gapPages({0, reach}, plan.pages[plan.order[pos + 1]], options.pageSize);
      if (gap > widest) {
        widest = gap;
        splitAfter = pos;
      }
    }
    if (widest == 0) {
      Status status = std::move(region).takeStatus();
      return status.withContext(strCat("group registration: blocks ", plan.order[group.first], "..",
                                       plan.order[group.last], " (", group.last - group.first + 1,
                                       " in address order) cannot be registered"));
    }
    ++result.splits;
    auto rangeOf = [&](uint32_t first, uint32_t last) {
      PageRange range = plan.pages[plan.order[first]];
      for (uint32_t pos = first + 1; pos <= last; ++pos) range.end = std::max(range.end, plan.pages[plan.order[pos]].end);
      return PlannedGroup{range, first, last};
    };
    work.push_back(rangeOf(splitAfter + 1, group.last));
    work.push_back(rangeOf(group.first, splitAfter));
  }
  return result;
}

}  // namespace ibdt::memory
