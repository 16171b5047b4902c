// tests/fuzz/store_fuzz_common.h — a private directory for the Unix sockets
// of the Store fuzz targets, removed when the process ends.
#pragma once

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

namespace ibdt::bootstrap::fuzz {

inline constexpr char kToken[] = "0123456789abcdef0123456789abcdef";

class SocketDirectory {
 public:
  SocketDirectory() {
    ::signal(SIGPIPE, SIG_IGN);  // a peer that closed early must not kill the target
    char pattern[] = "/tmp/ibdt-fuzz-store-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) ::abort();
    directory_ = pattern;
  }
  ~SocketDirectory() {
    ::unlink(path().c_str());
    ::rmdir(directory_.c_str());
  }
  std::string path() const { return directory_ + "/store.sock"; }

 private:
  std::string directory_;
};

}  // namespace ibdt::bootstrap::fuzz
