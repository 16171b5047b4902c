#include "transport/messaging/staging_pool.h"

#include <bit>

namespace ibdt::messaging {

Staging& Staging::operator=(Staging&& other) noexcept {
  if (this != &other) {
    release();
    pool_ = other.pool_;
    region_ = other.region_;
    data_ = other.data_;
    size_ = other.size_;
    poolIndex_ = other.poolIndex_;
    owned_ = std::move(other.owned_);
    other.pool_ = nullptr;
    other.region_ = nullptr;
    other.data_ = nullptr;
    other.size_ = 0;
    other.poolIndex_ = -1;
  }
  return *this;
}

void Staging::release() {
  if (data_ != nullptr && pool_ != nullptr) pool_->giveBack(*this);
  pool_ = nullptr;
  region_ = nullptr;
  data_ = nullptr;
  size_ = 0;
  poolIndex_ = -1;
  owned_.reset();
}

Result<std::unique_ptr<StagingPool>> StagingPool::create(fabric::Domain& domain, size_t bufferSize, uint32_t count,
                                                         size_t retainBytes) {
  if (bufferSize == 0) return makeError(Code::kInvalidArgument, "staging pool: buffer size 0");
  std::unique_ptr<StagingPool> pool(new StagingPool(domain, bufferSize, retainBytes));
  if (count > 0) {
    IBDT_ASSIGN_OR_RETURN(pool->region_, domain.allocateMemory(bufferSize * count, kAccess));
    for (int i = static_cast<int>(count) - 1; i >= 0; --i) pool->free_.push_back(i);
  }
  return pool;
}

Result<Staging> StagingPool::acquire(size_t bytes) {
  if (bytes <= bufferSize_ && !free_.empty()) {
    Staging staging;
    staging.pool_ = this;
    staging.poolIndex_ = free_.back();
    free_.pop_back();
    staging.region_ = region_.get();
    staging.data_ = static_cast<uint8_t*>(region_->address()) + static_cast<size_t>(staging.poolIndex_) * bufferSize_;
    staging.size_ = bufferSize_;
    return staging;
  }
  ++fallbacks_;
  return acquireDynamic(bytes, /*retain=*/true);
}

Result<Staging> StagingPool::acquireDynamic(size_t bytes, bool retain) {
  size_t length = std::bit_ceil(std::max(bytes, bufferSize_));
  Staging staging;
  auto found = retain ? retained_.lower_bound(length) : retained_.end();
  if (found != retained_.end() && found->first == length) {
    staging.owned_ = std::move(found->second);
    retained_.erase(found);
    retainedBytes_ -= length;
  } else {
    auto region = domain_.allocateMemory(retain ? length : bytes, kAccess);
    if (!region.isOk()) {
      return std::move(region).takeStatus().withContext(strCat("allocating a ", bytes, "-byte staging buffer"));
    }
    staging.owned_ = std::move(region).value();
  }
  staging.pool_ = retain ? this : nullptr;
  staging.region_ = staging.owned_.get();
  staging.data_ = static_cast<uint8_t*>(staging.owned_->address());
  staging.size_ = staging.owned_->length();
  return staging;
}

void StagingPool::giveBack(Staging& staging) {
  if (staging.poolIndex_ >= 0) {
    free_.push_back(staging.poolIndex_);
    return;
  }
  size_t length = staging.owned_->length();
  if (retainedBytes_ + length <= retainBytes_) {
    retainedBytes_ += length;
    retained_.emplace(length, std::move(staging.owned_));
  }
}

}  // namespace ibdt::messaging
