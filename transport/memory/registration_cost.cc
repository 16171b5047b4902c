#include "transport/memory/registration_cost.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

namespace ibdt::memory {
namespace {

Result<double> medianRegistrationNs(fabric::Domain& domain, void* address, size_t length, int reps) {
  std::vector<double> samples;
  for (int i = 0; i < reps + 1; ++i) {  // the first round is a warm-up
    auto start = std::chrono::steady_clock::now();
    {
      IBDT_ASSIGN_OR_RETURN(auto region, domain.registerMemory(address, length, fabric::kLocalWrite));
    }
    std::chrono::duration<double, std::nano> elapsed = std::chrono::steady_clock::now() - start;
    if (i > 0) samples.push_back(elapsed.count());
  }
  std::nth_element(samples.begin(), samples.begin() + static_cast<long>(samples.size() / 2), samples.end());
  return samples[samples.size() / 2];
}

}  // namespace

Result<fabric::RegistrationCost> measureRegistrationCost(fabric::Domain& domain, size_t largePages, int reps) {
  if (largePages < 2 || reps < 1) {
    return makeError(Code::kInvalidArgument, "registration cost: need at least 2 pages and 1 repetition");
  }
  size_t page = domain.caps().pageSize;
  size_t length = largePages * page;
  void* scratch = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (scratch == MAP_FAILED) {
    return makeError(Code::kSystem, "registration cost: mmap of ", length, " bytes failed: ", std::strerror(errno));
  }
  std::memset(scratch, 1, length);
  auto one = medianRegistrationNs(domain, scratch, page, reps);
  auto many = one.isOk() ? medianRegistrationNs(domain, scratch, length, reps) : one;
  munmap(scratch, length);
  if (!one.isOk()) return std::move(one).takeStatus();
  if (!many.isOk()) return std::move(many).takeStatus();
  fabric::RegistrationCost cost;
  cost.perPageNs = std::max(0.0, (*many - *one) / static_cast<double>(largePages - 1));
  cost.fixedNs = std::max(0.0, *one - cost.perPageNs);
  return cost;
}

Result<fabric::RegistrationCost> registrationCostOf(fabric::Domain& domain) {
  const fabric::RegistrationCost& published = domain.caps().registration;
  if (published.fixedNs > 0 || published.perPageNs > 0) return published;
  return measureRegistrationCost(domain);
}

}  // namespace ibdt::memory
