// transport/messaging/staging.h — a registered buffer for packing or
// unpacking: from the shared buffer pool (memory::BufferPool, which grows by
// allocation plus registration when it runs empty, paper Section 3.2.3), or
// a dedicated allocation and registration (the generic scheme's per-message
// buffers).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>

#include "ibdt/fabric.h"
#include "transport/memory/buffer_pool.h"

namespace ibdt::messaging {

struct Staging {
  struct Free {
    void operator()(uint8_t* allocation) const { std::free(allocation); }
  };
  memory::PoolBuffer pooled;
  std::unique_ptr<uint8_t, Free> memory;             // dedicated: the allocation...
  std::unique_ptr<fabric::MemoryRegion> dedicated;   // ...and its registration (destroyed first)

  explicit operator bool() const { return pooled || dedicated != nullptr; }
  uint8_t* data() const {
    return static_cast<uint8_t*>(dedicated ? dedicated->address() : pooled.data());
  }
  uint64_t address() const { return reinterpret_cast<uint64_t>(data()); }
  size_t size() const { return dedicated ? dedicated->length() : pooled.size(); }
  uint32_t lkey() const { return dedicated ? dedicated->lkey() : pooled.lkey(); }
  uint64_t rkey() const { return dedicated ? dedicated->rkey() : pooled.rkey(); }
};

}  // namespace ibdt::messaging
