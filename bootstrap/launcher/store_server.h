// bootstrap/launcher/store_server.h — ibdt-run's Store server.
//
// Serves put/commit/fence/get over a Unix-domain socket from its own thread.
// A connection must first present the job's token (checked in constant
// time) within a deadline, as a rank not yet connected; anything else is
// answered with an error and closed. Every frame is parsed as hostile. The server
// enforces the timeouts of fence and get, and fails the waits that involve a
// rank the launcher reported as ended.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ibdt/status.h"

namespace ibdt::bootstrap {

class StoreServer {
 public:
  // A connection has this long to say hello before it is dropped.
  static constexpr std::chrono::milliseconds kHelloTimeout{30'000};

  // `nodeOfRank[r]` is rank r's node id; its size is the job size.
  StoreServer(std::string token, std::vector<int> nodeOfRank, std::chrono::milliseconds helloTimeout = kHelloTimeout);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  // Binds `socketPath` (mode 0600) and listens. Clients may connect from
  // now on; they are answered once serve() runs. (ibdt-run forks the ranks
  // between the two, while it still has one thread.)
  Status listen(const std::string& socketPath);
  // Starts serving on a thread.
  void serve();
  // Stops the thread and closes every connection (also done by the destructor).
  void stop();
  // Tells the server that `rank`'s process ended; `how` is e.g. "exited with code 3".
  void rankEnded(int rank, std::string how);
  // Connections refused for a wrong token, the protocol, a rank already
  // connected or no hello in time (for tests and the report).
  int rejectedConnections() const { return rejected_.load(); }

 private:
  class Loop;
  std::string token_;
  std::vector<int> nodeOfRank_;
  std::chrono::milliseconds helloTimeout_;
  int listenFd_ = -1;
  int wakeFd_ = -1;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> rejected_{0};
  std::mutex endedMutex_;
  std::vector<std::pair<int, std::string>> endedQueue_;
};

}  // namespace ibdt::bootstrap
