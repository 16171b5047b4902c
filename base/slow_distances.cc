#include "base/slow_distances.h"

#include <cstdlib>
#include <cstring>
#include <memory>

#include "base/fastest.h"
#include "ibdt/status.h"

namespace ibdt {
namespace {
constexpr int64_t kPage = 4096;
}  // namespace

bool SlowDistances::slow(uintptr_t destination, uintptr_t source, size_t bytes) const {
  if (mask_ == 0 || bytes < kMinBytes) return false;
  int64_t distance = static_cast<int64_t>((destination - source) & (kPage - 1));
  if (distance >= kPage - kWindow) distance -= kPage;
  if (distance >= kWindow) return false;
  int bucket = distance == 0 ? kZeroBucket : static_cast<int>((distance + kWindow) / kBucket);
  return (mask_ >> bucket) & 1;
}

std::string SlowDistances::describe() const {
  std::string text;
  if ((mask_ >> kZeroBucket) & 1) text = "0";
  for (int bucket = 0; bucket < kBuckets; ++bucket) {
    if (!((mask_ >> bucket) & 1)) continue;
    int64_t from = bucketStart(bucket) == 0 ? 1 : bucketStart(bucket);  // 0 is its own bucket
    text += strCat(text.empty() ? "" : " ", "[", from, ",", bucketStart(bucket) + kBucket, ")");
  }
  return text.empty() ? "none" : text;
}

SlowDistances measureSlowDistances(const std::function<void(uint8_t*, const uint8_t*, size_t)>& copy) {
  constexpr size_t kBytes = 32 << 10;
  constexpr size_t kSpan = kBytes + 2 * kPage;
  auto release = [](uint8_t* memory) { std::free(memory); };
  std::unique_ptr<uint8_t, decltype(release)> from(static_cast<uint8_t*>(std::aligned_alloc(kPage, kSpan)), release);
  std::unique_ptr<uint8_t, decltype(release)> to(static_cast<uint8_t*>(std::aligned_alloc(kPage, kSpan)), release);
  SlowDistances slow;
  if (!from || !to) return slow;
  std::memset(from.get(), 1, kSpan);
  std::memset(to.get(), 2, kSpan);
  uint8_t* source = from.get() + kPage / 2;
  auto at = [&](int64_t distance) {
    return fastestNs(5, [&] { copy(to.get() + kPage / 2 + distance, source, kBytes); });
  };
  double far = at(kPage / 2);
  for (int bucket = 0; bucket <= SlowDistances::kZeroBucket; ++bucket) {
    if (at(SlowDistances::probeDistance(bucket)) > 2 * far) slow.mark(bucket);
  }
  return slow;
}

}  // namespace ibdt
