#include "bootstrap/launcher/descriptor_limit.h"

#include <dirent.h>

#include <cerrno>
#include <cstring>

namespace ibdt::bootstrap {
namespace {

// signalfd, listening socket, eventfd, watchdog pipe, /dev/null while
// spawning, and a few for the C library.
constexpr long kFixedDescriptors = 16;

long openDescriptors() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  long count = -1;  // the directory's own descriptor
  while (::readdir(dir) != nullptr) ++count;
  ::closedir(dir);
  return count - 2;  // "." and ".."
}

}  // namespace

Result<rlimit> raiseDescriptorLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return makeError(Code::kSystem, "getrlimit: ", std::strerror(errno));
  rlimit raised = limit;
  raised.rlim_cur = limit.rlim_max;
  if (raised.rlim_cur != limit.rlim_cur && ::setrlimit(RLIMIT_NOFILE, &raised) != 0) {
    return makeError(Code::kSystem, "setrlimit(RLIMIT_NOFILE, ", raised.rlim_cur, "): ", std::strerror(errno));
  }
  return limit;
}

long descriptorsNeeded(const LaunchOptions& options) {
  long perRank = options.prefixOutput ? 3 : 1;  // store connection, stdout and stderr pipes
  return static_cast<long>(options.ranks) * perRank + kFixedDescriptors;
}

Status checkDescriptorBudget(const LaunchOptions& options) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return makeError(Code::kSystem, "getrlimit: ", std::strerror(errno));
  if (limit.rlim_cur == RLIM_INFINITY) return Status::ok();
  long free = static_cast<long>(limit.rlim_cur) - openDescriptors();
  long needed = descriptorsNeeded(options);
  if (needed <= free) return Status::ok();
  return makeError(Code::kResource, "-n ", options.ranks, " needs about ", needed,
                   " file descriptors in the launcher but only ", free, " of the limit ", limit.rlim_cur,
                   " are free (hard limit ", limit.rlim_max, "); raise it with ulimit -n",
                   options.prefixOutput ? " or use --no-prefix (one descriptor per rank instead of three)" : "");
}

}  // namespace ibdt::bootstrap
