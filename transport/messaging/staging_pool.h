// transport/messaging/staging_pool.h — registered buffers for packing,
// unpacking and eager slots.
//
// The paper's BC-SPUP keeps a pool of pre-registered pack/unpack buffers
// shared by all peers and, when it runs out, falls back to dynamic
// allocation plus registration (Section 3.2.3). Buffers up to bufferSize come
// from the pool; larger ones, and any request once the pool is empty, are
// allocated and registered on demand. Released dynamic buffers are kept
// (by power-of-two size class) up to retainBytes so steady traffic stops
// paying for registration.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "ibdt/fabric.h"
#include "ibdt/status.h"

namespace ibdt::messaging {

class StagingPool;

// A registered buffer on loan from a StagingPool; returns itself when destroyed.
class Staging {
 public:
  Staging() = default;
  Staging(Staging&& other) noexcept { *this = std::move(other); }
  Staging& operator=(Staging&& other) noexcept;
  ~Staging() { release(); }

  bool valid() const { return data_ != nullptr; }
  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  uint32_t lkey() const { return region_->lkey(); }
  uint64_t rkey() const { return region_->rkey(); }
  uint64_t address() const { return reinterpret_cast<uint64_t>(data_); }
  void release();

 private:
  friend class StagingPool;
  StagingPool* pool_ = nullptr;
  fabric::MemoryRegion* region_ = nullptr;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  int poolIndex_ = -1;                            // >= 0: a pool slot
  std::unique_ptr<fabric::MemoryRegion> owned_;  // dynamic buffer
};

class StagingPool {
 public:
  static constexpr uint32_t kAccess = fabric::kLocalWrite | fabric::kRemoteWrite | fabric::kRemoteRead;

  static Result<std::unique_ptr<StagingPool>> create(fabric::Domain& domain, size_t bufferSize, uint32_t count,
                                                     size_t retainBytes);
  // A buffer of at least `bytes` bytes (bytes > 0).
  Result<Staging> acquire(size_t bytes);
  // Always a fresh registration (the generic scheme's dynamic buffers).
  Result<Staging> acquireDynamic(size_t bytes, bool retain);

  size_t bufferSize() const { return bufferSize_; }
  uint32_t freeBuffers() const { return static_cast<uint32_t>(free_.size()); }
  uint64_t fallbacks() const { return fallbacks_; }

 private:
  friend class Staging;
  StagingPool(fabric::Domain& domain, size_t bufferSize, size_t retainBytes)
      : domain_(domain), bufferSize_(bufferSize), retainBytes_(retainBytes) {}
  void giveBack(Staging& staging);

  fabric::Domain& domain_;
  size_t bufferSize_;
  size_t retainBytes_;
  std::unique_ptr<fabric::MemoryRegion> region_;
  std::vector<int> free_;
  std::multimap<size_t, std::unique_ptr<fabric::MemoryRegion>> retained_;  // by length
  size_t retainedBytes_ = 0;
  uint64_t fallbacks_ = 0;
};

}  // namespace ibdt::messaging
