// bootstrap/singleton_store.h — a job of one process, started without a
// launcher. Values live in this process; get() of a missing key waits (another
// thread may still put it) until the deadline.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

#include "ibdt/store.h"

namespace ibdt::bootstrap {

class SingletonStore final : public Store {
 public:
  SingletonStore() : Store(Placement{}) {}

  std::string_view backend() const override { return "singleton"; }

 private:
  Status doPut(std::string_view key, std::span<const uint8_t> value) override;
  Status doCommit() override;
  Status doFence(Deadline deadline) override;
  Result<Bytes> doGet(int rank, std::string_view key, Deadline deadline) override;

 private:
  std::mutex mutex_;
  std::condition_variable committed_;
  std::map<std::string, Bytes, std::less<>> staged_;
  std::map<std::string, Bytes, std::less<>> visible_;
};

}  // namespace ibdt::bootstrap
