// base/slow_distances.h — copies whose destination lies a few bytes after
// the source, modulo a page, can be several times slower. On the 2-core AMD
// EPYC VM (docs/tuning.md) a 64 KiB memcpy takes 23 µs instead of 1.5-2 µs
// when (destination − source) mod 4096 is in [1, 31], and process_vm_writev
// 29 µs instead of 7-9: both copy with `rep movsb`. Two ranks' blocks 16 B
// apart made a 64 KiB all-to-all 3-5x slower. Which distances are slow
// depends on the CPU, so they are measured on the machine that runs the code
// (a fraction of a millisecond per copy function) and only those copies take
// another route (base/copy_bytes.h, transport/fabric/shm/copy_distance.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace ibdt {

// A set of distances (destination − source) mod page, folded into
// [-kWindow, kWindow), in buckets of kBucket bytes, and 0.
class SlowDistances {
 public:
  static constexpr int64_t kWindow = 64;
  static constexpr int64_t kBucket = 8;
  static constexpr int kBuckets = static_cast<int>(2 * kWindow / kBucket);
  static constexpr size_t kMinBytes = 4096;  // shorter copies: the penalty is small against a call's own cost

  SlowDistances() = default;
  explicit SlowDistances(uint32_t mask) : mask_(mask) {}

  // Distance 0 (both ends at the same page offset, as page-aligned buffers
  // are) is its own bucket: it is the fast case where its neighbours are slow.
  static constexpr int kZeroBucket = kBuckets;

  static int64_t bucketStart(int bucket) { return -kWindow + bucket * kBucket; }
  // Where a bucket is probed: its centre; distance 0 for kZeroBucket.
  static int64_t probeDistance(int bucket) { return bucket == kZeroBucket ? 0 : bucketStart(bucket) + kBucket / 2; }
  void mark(int bucket) { mask_ |= uint32_t{1} << bucket; }
  uint32_t mask() const { return mask_; }
  // Whether a copy of `bytes` from `source` to `destination` is at a slow distance.
  bool slow(uintptr_t destination, uintptr_t source, size_t bytes) const;
  std::string describe() const;  // "0 [8,16) [16,24)", or "none"

 private:
  uint32_t mask_ = 0;
};

// Finds the slow distances of `copy(destination, source, bytes)`: a 32 KiB
// copy at each bucket's probe distance against the same copy half a page
// away, the fastest of 5 each. Slow means over twice as long: the effect is
// 3-15x where it exists, and a loaded machine's noise on a microsecond copy
// stays below 2x for the fastest of 5.
SlowDistances measureSlowDistances(const std::function<void(uint8_t*, const uint8_t*, size_t)>& copy);

}  // namespace ibdt
