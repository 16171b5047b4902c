// bootstrap/staged_values.h — values put() but not yet commit()ted, for the
// backends whose launcher has no staging of its own (ibdt-run, PMI-1,
// singleton). Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include "ibdt/store.h"

namespace ibdt::bootstrap {

class StagedValues {
 public:
  using Batch = std::map<std::string, Bytes, std::less<>>;

  // Stages `value` under `key`, replacing an earlier one.
  void put(std::string_view key, std::span<const uint8_t> value) {
    std::lock_guard lock(mutex_);
    staged_.insert_or_assign(std::string(key), Bytes(value.begin(), value.end()));
  }
  // Everything staged so far, in key order; leaves nothing staged.
  Batch take() {
    Batch batch;
    std::lock_guard lock(mutex_);
    batch.swap(staged_);
    return batch;
  }

 private:
  std::mutex mutex_;
  Batch staged_;
};

}  // namespace ibdt::bootstrap
