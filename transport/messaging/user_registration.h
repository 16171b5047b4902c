// transport/messaging/user_registration.h — a message's user buffer made
// reachable for a rendezvous that uses it in place.
//
// The cheap case is one region over the buffer's whole span through the
// pin-down cache (a buffer sent again hits the cache). A noncontiguous buffer
// whose span cannot be registered — its blocks lie in separate mappings with
// unmapped pages between, as a struct type over separately allocated arrays
// does — or whose span is beyond 256 MiB and four times its data is
// registered by Optimistic Group Registration instead (paper Section 4.4.1,
// memory/group_registration.h): a few regions, each local SGE taking the
// lkey of the region that covers it. A peer needs one rkey, so only the
// local side (the sender's gather, the receiver's READ scatter) may use
// several regions.
#pragma once

#include <cstdint>
#include <vector>

#include "ibdt/datatype.h"
#include "transport/memory/group_registration.h"
#include "transport/memory/registration_cache.h"

namespace ibdt::messaging {

class UserRegistration {
 public:
  // Registers the first `bytes` packed bytes of count x type at `base`.
  // `single`: one region is required (it will be handed to a peer).
  // `stats` are those of count x type.
  static Result<UserRegistration> create(memory::RegistrationCache& cache, const memory::GroupPlanOptions& plan,
                                         const datatype::Segment& segment, const datatype::Datatype& type,
                                         int64_t count, const datatype::Stats& stats, const void* base,
                                         int64_t bytes, uint32_t access, bool single);

  bool valid() const { return !regions_.empty(); }
  // The one region (or the first): what a peer is given.
  const memory::RegionRef& front() const { return regions_.front(); }
  // The lkey of the region covering [address, address + length).
  uint32_t lkey(uint64_t address, uint64_t length) const;
  // Address of packed byte 0.
  uint64_t firstAddress() const { return firstAddress_; }

 private:
  std::vector<memory::RegionRef> regions_;  // by start address
  uint64_t firstAddress_ = 0;
};

}  // namespace ibdt::messaging
