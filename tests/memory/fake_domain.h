// tests/memory/fake_domain.h — a Domain that only registers memory, for
// testing the memory layer without a provider.
//
// It behaves like ibv_reg_mr where the memory layer can tell: registering a
// range with an unmapped page fails (found with mincore(), which reports
// ENOMEM for unmapped pages), every registration gets fresh keys, a
// deregistered key stops working, and allocateMemory() maps and registers
// new memory. read() is the "transfer": it copies bytes through a key and
// checks the key is live and the range is inside its region. Calls are
// counted so tests can tell a cache hit from a fresh registration.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "ibdt/fabric.h"

namespace ibdt::memory::testing {

class FakeDomain final : public fabric::Domain {
 public:
  struct Stats {
    uint64_t registrations = 0;    // successful registerMemory calls
    uint64_t failures = 0;         // failed registerMemory calls
    uint64_t allocations = 0;      // successful allocateMemory calls
    uint64_t deregistrations = 0;
  };

  explicit FakeDomain(fabric::RegistrationCost cost = {5000, 250}) {
    caps_.provider = "fake";
    caps_.device = "fake";
    caps_.pageSize = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    caps_.registration = cost;
  }

  const fabric::Caps& caps() const override { return caps_; }

  Result<std::unique_ptr<fabric::MemoryRegion>> registerMemory(void* address, size_t length,
                                                               uint32_t access) override {
    auto begin = reinterpret_cast<uintptr_t>(address);
    if (length == 0 || begin + length < begin) {
      return makeError(Code::kInvalidArgument, "fake registerMemory: bad range ", address, " + ", length);
    }
    uintptr_t pageBegin = begin & ~(uintptr_t{caps_.pageSize} - 1);
    size_t pages = (begin + length - pageBegin + caps_.pageSize - 1) / caps_.pageSize;
    std::vector<unsigned char> residency(pages);
    if (mincore(reinterpret_cast<void*>(pageBegin), pages * caps_.pageSize, residency.data()) != 0) {
      std::lock_guard lock(mutex_);
      ++stats_.failures;
      return makeError(Code::kSystem, "fake registerMemory(", address, ", ", length,
                       "): range not mapped (mincore: ", std::strerror(errno), ")");
    }
    return makeRegion(address, length, access, false);
  }

  Result<std::unique_ptr<fabric::MemoryRegion>> allocateMemory(size_t length, uint32_t access) override {
    {
      std::lock_guard lock(mutex_);
      if (allocationLimit_ == 0) return makeError(Code::kResource, "fake allocateMemory: limit reached");
      --allocationLimit_;
    }
    void* memory = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) return makeError(Code::kResource, "fake allocateMemory: mmap failed");
    return makeRegion(memory, length, access, true);
  }

  Result<std::unique_ptr<fabric::CompletionQueue>> createCompletionQueue(uint32_t) override {
    return makeError(Code::kUnsupported, "fake domain has no queues");
  }
  Result<std::unique_ptr<fabric::Endpoint>> createEndpoint(fabric::CompletionQueue&, fabric::CompletionQueue&,
                                                          const fabric::EndpointOptions&) override {
    return makeError(Code::kUnsupported, "fake domain has no endpoints");
  }

  // Copies [address, address + length) through `lkey`, as a transfer would.
  Result<std::vector<uint8_t>> read(uint32_t lkey, const void* address, size_t length) const {
    std::lock_guard lock(mutex_);
    auto it = live_.find(lkey);
    if (it == live_.end()) return makeError(Code::kRemoteAccess, "fake read: lkey ", lkey, " is not registered");
    auto begin = reinterpret_cast<uintptr_t>(address);
    if (begin < it->second.begin || begin + length > it->second.end) {
      return makeError(Code::kRemoteAccess, "fake read: range outside the region of lkey ", lkey);
    }
    const auto* bytes = static_cast<const uint8_t*>(address);
    return std::vector<uint8_t>(bytes, bytes + length);
  }

  bool isLive(uint32_t lkey) const {
    std::lock_guard lock(mutex_);
    return live_.count(lkey) != 0;
  }
  size_t liveRegions() const {
    std::lock_guard lock(mutex_);
    return live_.size();
  }
  Stats stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
  }
  void setAllocationLimit(uint64_t limit) {
    std::lock_guard lock(mutex_);
    allocationLimit_ = limit;
  }

 private:
  struct Live {
    uintptr_t begin;
    uintptr_t end;
  };

  class Region final : public fabric::MemoryRegion {
   public:
    Region(FakeDomain& domain, void* address, size_t length, uint32_t key, uint32_t access, bool owned)
        : MemoryRegion(address, length, key, key, access), domain_(domain), owned_(owned) {}
    ~Region() override {
      domain_.forget(lkey());
      if (owned_) munmap(address(), length());
    }

   private:
    FakeDomain& domain_;
    bool owned_;
  };

  Result<std::unique_ptr<fabric::MemoryRegion>> makeRegion(void* address, size_t length, uint32_t access,
                                                           bool owned) {
    std::lock_guard lock(mutex_);
    uint32_t key = nextKey_++;
    auto begin = reinterpret_cast<uintptr_t>(address);
    live_[key] = {begin, begin + length};
    ++(owned ? stats_.allocations : stats_.registrations);
    return std::unique_ptr<fabric::MemoryRegion>(new Region(*this, address, length, key, access, owned));
  }

  void forget(uint32_t key) {
    std::lock_guard lock(mutex_);
    live_.erase(key);
    ++stats_.deregistrations;
  }

  fabric::Caps caps_;
  mutable std::mutex mutex_;
  std::map<uint32_t, Live> live_;
  uint32_t nextKey_ = 1;
  uint64_t allocationLimit_ = UINT64_MAX;
  Stats stats_;
};

}  // namespace ibdt::memory::testing
