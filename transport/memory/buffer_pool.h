// transport/memory/buffer_pool.h — pre-registered buffers for eager rings,
// staging and pack buffers.
//
// Buffers are page-aligned, come from Domain::allocateMemory (on shm: shared
// memory peers map, so one-sided access is a plain copy) and are registered
// when they are made, so handing one out costs a free-list pop. Sizes are
// power-of-two multiples of the page size up to a maximum; a class that runs
// empty grows by one chunk (a single allocation and registration cut into
// buffers); a chunk whose buffers are all free again is released once the
// class keeps more free bytes than the high-water mark. Requests larger than
// the largest class get a dedicated registration, released on return.
//
// One pool serves every peer of a process, so a key that reached a whole
// chunk would let one peer read and write the buffers other peers' transfers
// use (issue 17). Where the provider registers part of an allocation cheaply
// (Caps::cheapSubRegistration: shm), chunks are registered for local access
// only and every hand-out registers its buffer for remote access: a peer's
// key reaches that buffer, and only until it is given back. Where it binds
// memory windows instead (Caps::memoryWindows: verbs on devices with type-2
// windows), a hand-out for a peer binds one over its buffer on that peer's
// endpoint, so only that peer can use the key; a hand-out for no peer gets
// no remote key at all. Elsewhere (verbs without windows: ibv_reg_mr per
// hand-out would cost microseconds) a buffer's key is its chunk's.
// docs/security.md gives the costs. IBDT_POOL_BUFFER_KEYS=off turns
// per-buffer keys off.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ibdt/fabric.h"
#include "ibdt/status.h"

namespace ibdt::memory {

struct PoolOptions {
  size_t chunkBytes = size_t{1} << 20;      // bytes allocated per growth (at least one buffer)
  size_t maxBufferBytes = size_t{4} << 20;  // largest size class
  size_t highWaterBytes = size_t{32} << 20; // free bytes kept per class
  uint32_t access = fabric::kLocalWrite | fabric::kRemoteWrite | fabric::kRemoteRead;
  // A key per handed-out buffer where the provider makes it cheap (above).
  bool perBufferKeys = true;

  // IBDT_POOL_CHUNK_BYTES, IBDT_POOL_MAX_BUFFER, IBDT_POOL_HIGH_WATER, IBDT_POOL_BUFFER_KEYS.
  static Result<PoolOptions> fromEnvironment();
};

struct PoolCounters {
  uint64_t gets = 0;
  uint64_t hits = 0;       // served from a free list
  uint64_t growths = 0;    // chunks allocated and registered
  uint64_t releases = 0;   // chunks released above the high-water mark
  uint64_t oversize = 0;   // dedicated allocations larger than the largest class
  uint64_t buffersInUse = 0;
  uint64_t bufferKeys = 0;      // hand-outs that registered their buffer alone
  uint64_t bytesAllocated = 0;  // registered by the pool now
};

// "gets=… hits=… …" for logs, IBDT_STATS and tools.
std::string describe(const PoolCounters& counters);

class BufferPool;
struct PoolChunk;

// A pooled buffer. Move-only; returns to its pool on reset or destruction and
// must not outlive it.
class PoolBuffer {
 public:
  PoolBuffer() = default;
  PoolBuffer(PoolBuffer&& other) noexcept { *this = std::move(other); }
  PoolBuffer& operator=(PoolBuffer&& other) noexcept;
  ~PoolBuffer() { reset(); }

  explicit operator bool() const { return data_ != nullptr; }
  void* data() const { return data_; }
  size_t size() const { return size_; }  // the class size: at least what was asked
  // The registration peers reach the buffer through: its own where the pool
  // gives per-buffer keys, else its chunk's (which holds other buffers too).
  const fabric::MemoryRegion& region() const { return *region_; }
  uint32_t lkey() const { return region_->lkey(); }
  uint64_t rkey() const { return region_->rkey(); }
  fabric::Sge sge(uint32_t length) const { return {reinterpret_cast<uint64_t>(data_), length, lkey()}; }
  fabric::RemoteKey remoteKey() const { return {reinterpret_cast<uint64_t>(data_), size_, rkey()}; }
  void reset();

 private:
  friend class BufferPool;
  BufferPool* pool_ = nullptr;
  PoolChunk* chunk_ = nullptr;
  uint32_t slot_ = 0;
  void* data_ = nullptr;
  size_t size_ = 0;
  const fabric::MemoryRegion* region_ = nullptr;
  std::unique_ptr<fabric::MemoryRegion> own_;  // this hand-out's registration, if any
};

class BufferPool {
 public:
  static Result<std::unique_ptr<BufferPool>> create(fabric::Domain& domain, const PoolOptions& options);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A registered, page-aligned buffer of at least `bytes` bytes (0: the
  // smallest class). `keyFor`: the endpoint whose peer will get the buffer's
  // key, if any (with memory windows only that peer can use it; without
  // one, the key reaches nothing remotely). Fails when the provider cannot
  // allocate or bind.
  Result<PoolBuffer> get(size_t bytes, fabric::Endpoint* keyFor = nullptr);

  PoolCounters counters() const;
  // The buffer size a request for `bytes` gets (bytes rounded up to a page
  // multiple when larger than the largest class).
  size_t classSize(size_t bytes) const;
  size_t maxBufferBytes() const { return classSizes_.back(); }
  // Whether handed-out buffers carry keys of their own (see above).
  bool perBufferKeys() const { return perBufferKeys_; }

 private:
  struct SizeClass {
    size_t bufferBytes = 0;
    std::vector<std::unique_ptr<PoolChunk>> chunks;  // oldest first
    size_t freeBuffers = 0;
  };

  BufferPool(fabric::Domain& domain, const PoolOptions& options);
  friend class PoolBuffer;
  // Deregisters `own` (the hand-out's key dies) before the slot is reusable.
  void giveBack(PoolChunk* chunk, uint32_t slot, std::unique_ptr<fabric::MemoryRegion> own);
  // The hand-out's own key (registration or window), or null where it has none.
  Result<std::unique_ptr<fabric::MemoryRegion>> bufferKey(const PoolChunk& chunk, void* data,
                                                          fabric::Endpoint* keyFor);
  // A chunk of the class of `index` with a free slot, grown (or a dedicated
  // one made) when none has; the class's free count already taken. Under mutex_.
  Result<PoolChunk*> chunkWithFreeSlot(size_t index, size_t bytes);
  Result<std::unique_ptr<PoolChunk>> makeChunk(size_t bufferBytes, uint32_t buffers, bool dedicated);
  size_t classIndex(size_t bytes) const;

  fabric::Domain& domain_;
  std::mutex& providerLock_;  // held for every call into domain_ (always the innermost lock)
  const PoolOptions options_;
  bool printStats_ = false;  // IBDT_STATS, read at creation
  bool perBufferKeys_ = false;
  bool windows_ = false;  // per-buffer keys are memory windows (else registrations)
  std::vector<size_t> classSizes_;

  mutable std::mutex mutex_;
  std::vector<SizeClass> classes_;
  std::vector<std::unique_ptr<PoolChunk>> oversize_;
  PoolCounters counters_;
};

}  // namespace ibdt::memory
