// bootstrap/pmi1/pmi1_client.h — the PMI-1 text wire protocol, as spoken by
// MPICH's Hydra (mpiexec.mpich) on the socket it hands over in PMI_FD.
//
// Each request is one line "cmd=<name> key=value ...\n" answered by one line.
// Calls are serialized: PMI-1 has one request in flight per process.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "ibdt/deadline.h"
#include "ibdt/status.h"

namespace ibdt::bootstrap::pmi1 {

class Client {
 public:
  // Takes over the connected socket `fd` and performs the init handshake.
  static Result<std::unique_ptr<Client>> connect(int fd, Deadline deadline);
  ~Client();  // sends finalize
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const std::string& kvsName() const { return kvsName_; }
  // Longest key and value in characters. The server's keylen_max and
  // vallen_max count C strings' terminating NUL (Hydra cuts a 1024-character
  // value to 1023).
  size_t maxKeyLength() const { return keyMax_ - 1; }
  size_t maxValueLength() const { return valueMax_ - 1; }

  Status put(std::string_view key, std::string_view value, Deadline deadline);
  // kNotFound when the KVS has no such key (yet).
  Result<std::string> get(std::string_view key, Deadline deadline);
  Status barrier(Deadline deadline);

 private:
  using Fields = std::map<std::string, std::string, std::less<>>;
  explicit Client(int fd) : fd_(fd) {}
  // Sends `request` and reads the reply, which must be `cmd=<expected>`.
  Result<Fields> exchange(const std::string& request, std::string_view expected, Deadline deadline);
  Result<Fields> exchangeLocked(const std::string& request, std::string_view expected, Deadline deadline);

  int fd_;
  std::mutex mutex_;
  std::string buffer_;
  Status broken_;  // a timed-out exchange leaves the stream unusable
  std::string kvsName_;
  size_t keyMax_ = 64;
  size_t valueMax_ = 1024;
};

// Splits "cmd=get_result rc=0 value=abc" into fields.
Result<std::map<std::string, std::string, std::less<>>> parseLine(std::string_view line);

}  // namespace ibdt::bootstrap::pmi1
