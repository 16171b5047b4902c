#include "transport/memory/buffer_pool.h"

#include <algorithm>
#include <bit>
#include <utility>

#include "base/config.h"
#include "base/log.h"
#include "transport/memory/page_range.h"
#include "transport/memory/provider_lock.h"

namespace ibdt::memory {
namespace {
constexpr uint32_t kRemote = fabric::kRemoteWrite | fabric::kRemoteRead;
}

struct PoolChunk {
  std::unique_ptr<fabric::MemoryRegion> region;
  size_t bufferBytes = 0;
  uint32_t buffers = 0;
  std::vector<uint32_t> freeSlots;  // a stack: the most recently returned buffer is reused first (warm)
  int sizeClass = -1;               // -1: a dedicated oversize allocation
};

Result<PoolOptions> PoolOptions::fromEnvironment() {
  PoolOptions options;
  IBDT_ASSIGN_OR_RETURN(options.chunkBytes, config::getSize("IBDT_POOL_CHUNK_BYTES"));
  IBDT_ASSIGN_OR_RETURN(options.maxBufferBytes, config::getSize("IBDT_POOL_MAX_BUFFER"));
  IBDT_ASSIGN_OR_RETURN(options.highWaterBytes, config::getSize("IBDT_POOL_HIGH_WATER"));
  IBDT_ASSIGN_OR_RETURN(int keys, config::getChoice("IBDT_POOL_BUFFER_KEYS", {"auto", "off"}));
  options.perBufferKeys = keys == 0;
  return options;
}

std::string describe(const PoolCounters& c) {
  return strCat("gets=", c.gets, " hits=", c.hits, " growths=", c.growths, " releases=", c.releases,
                " oversize=", c.oversize, " in-use=", c.buffersInUse, " buffer-keys=", c.bufferKeys, " allocated=", c.bytesAllocated, "B");
}

PoolBuffer& PoolBuffer::operator=(PoolBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    pool_ = std::exchange(other.pool_, nullptr);
    chunk_ = std::exchange(other.chunk_, nullptr);
    slot_ = std::exchange(other.slot_, 0);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    region_ = std::exchange(other.region_, nullptr);
    own_ = std::move(other.own_);
  }
  return *this;
}

void PoolBuffer::reset() {
  if (pool_ != nullptr) pool_->giveBack(chunk_, slot_, std::move(own_));
  pool_ = nullptr;
  chunk_ = nullptr;
  data_ = nullptr;
  size_ = 0;
  region_ = nullptr;
}

Result<std::unique_ptr<BufferPool>> BufferPool::create(fabric::Domain& domain, const PoolOptions& options) {
  size_t page = domain.caps().pageSize;
  if (page == 0 || !std::has_single_bit(page)) {
    return makeError(Code::kInvalidArgument, "buffer pool: provider page size ", page, " is not a power of two");
  }
  if (options.maxBufferBytes < page || options.maxBufferBytes > (size_t{1} << 40)) {
    return makeError(Code::kInvalidArgument, "buffer pool: largest buffer ", options.maxBufferBytes,
                     " bytes must lie between one page (", page, ") and 1 TiB");
  }
  // Checked here, not at exit: IBDT_STATS=garbage is an error, never silently off.
  IBDT_ASSIGN_OR_RETURN(bool printStats, config::getBool("IBDT_STATS"));
  auto pool = std::unique_ptr<BufferPool>(new BufferPool(domain, options));
  pool->printStats_ = printStats;
  const fabric::Caps& caps = domain.caps();
  pool->perBufferKeys_ = options.perBufferKeys && (caps.cheapSubRegistration || caps.memoryWindows) &&
                         (options.access & kRemote) != 0;
  pool->windows_ = pool->perBufferKeys_ && !caps.cheapSubRegistration;
  if (caps.memoryWindows) {
    IBDT_LOG(kDebug, "buffer pool on ", caps.device, ": ",
             pool->windows_ ? "a memory window per buffer handed to a peer"
                            : "memory windows unused (IBDT_POOL_BUFFER_KEYS=off or no remote access)");
  } else if (!caps.cheapSubRegistration && (options.access & kRemote) != 0) {
    IBDT_LOG(kDebug, "buffer pool on ", caps.device, ": no memory windows, a buffer's key reaches its ",
             options.chunkBytes, "-byte chunk");
  }
  return pool;
}

BufferPool::BufferPool(fabric::Domain& domain, const PoolOptions& options)
    : domain_(domain), providerLock_(providerLock(domain)), options_(options) {
  size_t page = domain.caps().pageSize;
  for (size_t size = page; size < options.maxBufferBytes; size *= 2) classSizes_.push_back(size);
  classSizes_.push_back(std::bit_ceil(std::max(options.maxBufferBytes, page)));
  classes_.resize(classSizes_.size());
  for (size_t i = 0; i < classes_.size(); ++i) classes_[i].bufferBytes = classSizes_[i];
}

BufferPool::~BufferPool() {
  if (printStats_) log::write(log::Level::kInfo, strCat("buffer pool: ", describe(counters())));
  std::lock_guard lock(mutex_);
  if (counters_.buffersInUse > 0) {
    // Deregistering memory a transfer still uses would fault it; leak instead.
    IBDT_LOG(kError, "buffer pool destroyed with ", counters_.buffersInUse, " buffers still in use; leaking their chunks");
  }
  auto destroy = [&](std::unique_ptr<PoolChunk>& chunk) {
    if (chunk->freeSlots.size() == chunk->buffers) {
      destroyRegion(providerLock_, std::move(chunk->region));
    } else {
      (void)chunk.release();
    }
  };
  for (SizeClass& sizeClass : classes_) std::for_each(sizeClass.chunks.begin(), sizeClass.chunks.end(), destroy);
  std::for_each(oversize_.begin(), oversize_.end(), destroy);
}

size_t BufferPool::classIndex(size_t bytes) const {
  return static_cast<size_t>(std::lower_bound(classSizes_.begin(), classSizes_.end(), bytes) - classSizes_.begin());
}

size_t BufferPool::classSize(size_t bytes) const {
  size_t index = classIndex(bytes);
  return index < classSizes_.size() ? classSizes_[index] : alignUp(bytes, classSizes_.front());
}

Result<std::unique_ptr<PoolChunk>> BufferPool::makeChunk(size_t bufferBytes, uint32_t buffers, bool dedicated) {
  Result<std::unique_ptr<fabric::MemoryRegion>> allocated = Status(Code::kInternal, "not allocated");
  {
    std::lock_guard provider(providerLock_);
    // With per-buffer keys a shared chunk's own key grants no peer anything.
    bool ownKeys = perBufferKeys_ && !dedicated;
    allocated = domain_.allocateMemory(bufferBytes * buffers, ownKeys ? fabric::kLocalWrite : options_.access);
  }
  IBDT_ASSIGN_OR_RETURN(auto region, std::move(allocated));
  auto chunk = std::make_unique<PoolChunk>();
  chunk->region = std::move(region);
  chunk->bufferBytes = bufferBytes;
  chunk->buffers = buffers;
  chunk->freeSlots.reserve(buffers);
  for (uint32_t slot = buffers; slot-- > 0;) chunk->freeSlots.push_back(slot);
  return chunk;
}

Result<PoolChunk*> BufferPool::chunkWithFreeSlot(size_t index, size_t bytes) {
  size_t page = classSizes_.front();
  PoolChunk* chunk = nullptr;
  if (index == classSizes_.size()) {
    auto made = makeChunk(alignUp(bytes, page), 1, /*dedicated=*/true);
    if (!made.isOk()) {
      Status status = std::move(made).takeStatus();
      return status.withContext(strCat("buffer pool: allocating a dedicated ", bytes, "-byte buffer"));
    }
    chunk = made->get();
    counters_.bytesAllocated += chunk->region->length();
    oversize_.push_back(std::move(made).value());
    ++counters_.oversize;
  } else {
    SizeClass& sizeClass = classes_[index];
    for (auto& candidate : sizeClass.chunks) {
      if (!candidate->freeSlots.empty()) {
        chunk = candidate.get();
        break;
      }
    }
    if (chunk != nullptr) {
      ++counters_.hits;
    } else {
      size_t buffers = std::max<size_t>(1, options_.chunkBytes / sizeClass.bufferBytes);
      auto made = makeChunk(sizeClass.bufferBytes, static_cast<uint32_t>(buffers), /*dedicated=*/false);
      if (!made.isOk()) {
        Status status = std::move(made).takeStatus();
        return status.withContext(strCat("buffer pool: growing the ", sizeClass.bufferBytes, "-byte class by ",
                                         buffers, " buffers"));
      }
      chunk = made->get();
      chunk->sizeClass = static_cast<int>(index);
      counters_.bytesAllocated += chunk->region->length();
      sizeClass.chunks.push_back(std::move(made).value());
      sizeClass.freeBuffers += buffers;
      ++counters_.growths;
    }
    --sizeClass.freeBuffers;
  }
  return chunk;
}

Result<PoolBuffer> BufferPool::get(size_t bytes, fabric::Endpoint* keyFor) {
  if (bytes > SIZE_MAX - classSizes_.front()) {
    return makeError(Code::kOverflow, "buffer pool: request of ", bytes, " bytes overflows");
  }
  size_t index = classIndex(bytes);
  std::lock_guard lock(mutex_);
  ++counters_.gets;
  IBDT_ASSIGN_OR_RETURN(PoolChunk* chunk, chunkWithFreeSlot(index, bytes));
  uint32_t slot = chunk->freeSlots.back();
  void* data = static_cast<char*>(chunk->region->address()) + size_t{slot} * chunk->bufferBytes;
  std::unique_ptr<fabric::MemoryRegion> own;
  if (perBufferKeys_ && chunk->sizeClass >= 0) {  // a dedicated chunk's key dies with the hand-out already
    auto key = bufferKey(*chunk, data, keyFor);
    if (!key.isOk()) {
      Status status = std::move(key).takeStatus();
      ++classes_[index].freeBuffers;  // the slot stays free
      return status.withContext(strCat("buffer pool: ", windows_ ? "binding a memory window over" : "registering",
                                       " a ", chunk->bufferBytes, "-byte buffer for its own key"));
    }
    own = std::move(key).value();
    if (own != nullptr) ++counters_.bufferKeys;
  }
  chunk->freeSlots.pop_back();
  ++counters_.buffersInUse;

  PoolBuffer buffer;
  buffer.pool_ = this;
  buffer.chunk_ = chunk;
  buffer.slot_ = slot;
  buffer.data_ = data;
  buffer.size_ = chunk->bufferBytes;
  buffer.region_ = own != nullptr ? own.get() : chunk->region.get();
  buffer.own_ = std::move(own);
  return buffer;
}

Result<std::unique_ptr<fabric::MemoryRegion>> BufferPool::bufferKey(const PoolChunk& chunk, void* data,
                                                                     fabric::Endpoint* keyFor) {
  std::lock_guard provider(providerLock_);
  if (!windows_) return domain_.registerMemory(data, chunk.bufferBytes, options_.access);
  if (keyFor == nullptr) return std::unique_ptr<fabric::MemoryRegion>();  // stays local: the chunk's lkey
  return domain_.bindWindow(*chunk.region, data, chunk.bufferBytes, options_.access & kRemote, *keyFor);
}

void BufferPool::giveBack(PoolChunk* chunk, uint32_t slot, std::unique_ptr<fabric::MemoryRegion> own) {
  destroyRegion(providerLock_, std::move(own));  // the hand-out's key dies before the slot is reused
  std::unique_ptr<PoolChunk> released;  // destroyed (deregistered) after the lock is dropped
  {
    std::lock_guard lock(mutex_);
    --counters_.buffersInUse;
    chunk->freeSlots.push_back(slot);
    bool chunkFree = chunk->freeSlots.size() == chunk->buffers;
    auto take = [&](std::vector<std::unique_ptr<PoolChunk>>& chunks) {
      auto it = std::find_if(chunks.begin(), chunks.end(), [&](const auto& c) { return c.get() == chunk; });
      released = std::move(*it);
      chunks.erase(it);
      counters_.bytesAllocated -= released->region->length();
    };
    if (chunk->sizeClass < 0) {
      take(oversize_);
    } else {
      SizeClass& sizeClass = classes_[static_cast<size_t>(chunk->sizeClass)];
      ++sizeClass.freeBuffers;
      if (chunkFree && sizeClass.freeBuffers * sizeClass.bufferBytes > options_.highWaterBytes) {
        sizeClass.freeBuffers -= chunk->buffers;
        take(sizeClass.chunks);
        ++counters_.releases;
      }
    }
  }
  if (released != nullptr) destroyRegion(providerLock_, std::move(released->region));
}

PoolCounters BufferPool::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

}  // namespace ibdt::memory
