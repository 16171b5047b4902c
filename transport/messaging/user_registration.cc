#include "transport/messaging/user_registration.h"

#include <algorithm>

#include "transport/memory/peer_span.h"

namespace ibdt::messaging {
namespace {

// A span up to this size is registered whole first: through the cache a
// buffer sent again then costs one lookup, where planning groups would list
// every block of every message. Larger spans that carry little data are
// planned by OGR at once, so as not to pin gigabytes of gaps.
constexpr int64_t kSpanFirstBytes = int64_t{256} << 20;

}  // namespace

Result<UserRegistration> UserRegistration::create(memory::RegistrationCache& cache,
                                                  const memory::GroupPlanOptions& plan,
                                                  const datatype::Segment& segment, const datatype::Datatype& type,
                                                  int64_t count, const datatype::Stats& stats, const void* base,
                                                  int64_t bytes, uint32_t access, bool single) {
  UserRegistration result;
  auto start = reinterpret_cast<uint64_t>(base);
  datatype::Iovec first{};
  IBDT_ASSIGN_OR_RETURN(auto fill, segment.iovecs(start, 0, bytes, &first, 1));
  if (fill.entries != 1) return makeError(Code::kInternal, "no first block for ", bytes, " packed bytes");
  result.firstAddress_ = first.address;

  // The span every element of count x type touches.
  int64_t last = (count - 1) * type.extent();
  int64_t low = type.trueLb() + std::min<int64_t>(0, last);
  int64_t high = type.trueUb() + std::max<int64_t>(0, last);
  // One key for a peer never spans much more than the data (memory/peer_span.h).
  if (single && !stats.contiguous) IBDT_RETURN_IF_ERROR(memory::checkPeerSpan(high - low, stats.size));
  const auto* bytesBase = static_cast<const uint8_t*>(base);
  auto spanRegistration = [&] {
    return cache.acquire(const_cast<uint8_t*>(bytesBase) + low, static_cast<size_t>(high - low), access);
  };
  bool planned = !single && !stats.contiguous && high - low > kSpanFirstBytes && high - low > 4 * bytes;
  if (!planned) {
    auto region = spanRegistration();
    if (region.isOk() || single || stats.contiguous) {
      if (!region.isOk()) {
        return std::move(region).takeStatus().withContext(
            strCat("registering the ", high - low, "-byte span of a user buffer"));
      }
      result.regions_.push_back(std::move(region).value());
      return result;
    }
  }
  // Optimistic Group Registration over the blocks of [0, bytes).
  std::vector<memory::Block> blocks;
  std::vector<datatype::Iovec> batch(256);
  for (int64_t at = 0; at < bytes;) {
    IBDT_ASSIGN_OR_RETURN(auto got, segment.iovecs(start, at, bytes, batch.data(), batch.size()));
    if (got.bytes == 0) break;
    for (size_t i = 0; i < got.entries; ++i) {
      blocks.push_back({reinterpret_cast<const void*>(batch[i].address), static_cast<size_t>(batch[i].length)});
    }
    at += got.bytes;
  }
  IBDT_ASSIGN_OR_RETURN(auto groups, memory::registerGroups(cache, blocks, access, plan));
  result.regions_ = std::move(groups.regions);
  std::sort(result.regions_.begin(), result.regions_.end(), [](const memory::RegionRef& a, const memory::RegionRef& b) {
    return a.region().address() < b.region().address();
  });
  if (result.regions_.empty()) return makeError(Code::kInternal, "group registration returned no region");
  return result;
}

uint32_t UserRegistration::lkey(uint64_t address, uint64_t length) const {
  if (regions_.size() == 1) return regions_.front().lkey();
  // The last region starting at or before `address` that also covers its end.
  auto after = std::upper_bound(regions_.begin(), regions_.end(), address, [](uint64_t at, const memory::RegionRef& r) {
    return at < reinterpret_cast<uint64_t>(r.region().address());
  });
  for (auto it = after; it != regions_.begin();) {
    --it;
    auto begin = reinterpret_cast<uint64_t>(it->region().address());
    if (address + length <= begin + it->region().length()) return it->lkey();
  }
  return regions_.front().lkey();  // not covered: the provider reports a local protection error
}

}  // namespace ibdt::messaging
