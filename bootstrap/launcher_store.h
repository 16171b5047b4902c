// bootstrap/launcher_store.h — the Store client of ibdt-run's local server.
//
// One Unix-socket connection per Store. Requests from several threads may be
// in flight at once: each carries an id, and whichever waiting thread holds
// the "reader" role reads the next reply and hands it to its owner.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "ibdt/store.h"

namespace ibdt::bootstrap {

class LauncherStore final : public Store {
 public:
  // Connects to `socketPath`, presents `token` and claims `rank`.
  static Result<std::unique_ptr<Store>> connect(const std::string& socketPath, std::string_view token, int rank,
                                                Deadline deadline);
  ~LauncherStore() override;

  std::string_view backend() const override { return "ibdt-run"; }

 private:
  Status doPut(std::string_view key, std::span<const uint8_t> value) override;
  Status doCommit() override;
  Status doFence(Deadline deadline) override;
  Result<Bytes> doGet(int rank, std::string_view key, Deadline deadline) override;

  struct Reply {
    Code code = Code::kOk;
    std::string message;
    std::string body;
  };
  LauncherStore(const Placement& placement, int fd) : Store(placement), fd_(fd) {}
  uint64_t newRequestId() { return nextId_.fetch_add(1); }
  // Sends a finished request frame and waits for its reply. The server
  // enforces the operation's own timeout; `deadline` only bounds how long we
  // wait for the server to say so.
  Result<Reply> call(uint64_t id, std::string frame, Deadline deadline);
  Status readOneReply(Deadline deadline);  // caller holds the reader role
  static Deadline replyDeadline(Deadline operation);

  int fd_;
  std::atomic<uint64_t> nextId_{1};
  std::mutex writeMutex_;
  std::mutex mutex_;  // guards everything below
  std::condition_variable replied_;
  bool reading_ = false;
  Status broken_;  // set once the connection failed; every later call fails with it
  std::set<uint64_t> waiting_;
  std::map<uint64_t, Reply> replies_;
  std::mutex stagedMutex_;
  std::map<std::string, Bytes, std::less<>> staged_;
};

// Encodes a relative timeout for the wire (wire::kNoTimeout for never).
uint64_t timeoutMillis(Deadline deadline);

}  // namespace ibdt::bootstrap
