#include "bootstrap/singleton_store.h"

namespace ibdt::bootstrap {

Status SingletonStore::doPut(std::string_view key, std::span<const uint8_t> value) {
  std::lock_guard lock(mutex_);
  staged_.insert_or_assign(std::string(key), Bytes(value.begin(), value.end()));
  return Status::ok();
}

Status SingletonStore::doCommit() {
  std::lock_guard lock(mutex_);
  for (auto& [key, value] : staged_) visible_.insert_or_assign(key, std::move(value));
  staged_.clear();
  committed_.notify_all();
  return Status::ok();
}

Status SingletonStore::doFence(Deadline) { return Status::ok(); }

Result<Bytes> SingletonStore::doGet(int /*rank: always 0*/, std::string_view key, Deadline deadline) {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (auto found = visible_.find(key); found != visible_.end()) return found->second;
    if (deadline.expired()) {
      return makeError(Code::kTimeout, "store get: rank 0 (this singleton process) did not put '", key,
                       "' before the deadline");
    }
    if (deadline.isNever()) {
      committed_.wait(lock);
    } else {
      committed_.wait_until(lock, deadline.when());
    }
  }
}

}  // namespace ibdt::bootstrap
