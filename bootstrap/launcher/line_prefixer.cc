#include "bootstrap/launcher/line_prefixer.h"

#include <unistd.h>

#include <cerrno>

namespace ibdt::bootstrap {
namespace {

// A line longer than this is forwarded in pieces rather than held forever.
constexpr size_t kMaxPending = 64 * 1024;

}  // namespace

void LinePrefixer::emit(std::string_view line) {
  std::string out;
  out.reserve(prefix_.size() + line.size() + 1);
  out.append(prefix_).append(line).push_back('\n');
  std::string_view rest = out;
  while (!rest.empty()) {
    ssize_t written = ::write(outFd_, rest.data(), rest.size());
    if (written > 0) {
      rest.remove_prefix(static_cast<size_t>(written));
    } else if (written < 0 && errno == EINTR) {
      continue;
    } else {
      return;  // our own output is gone (closed pipe): drop, never block the job
    }
  }
}

void LinePrefixer::feed(std::string_view data) {
  pending_.append(data);
  size_t start = 0;
  for (size_t newline; (newline = pending_.find('\n', start)) != std::string::npos; start = newline + 1) {
    emit(std::string_view(pending_).substr(start, newline - start));
  }
  pending_.erase(0, start);
  if (pending_.size() > kMaxPending) {
    emit(pending_);
    pending_.clear();
  }
}

void LinePrefixer::finish() {
  if (!pending_.empty()) emit(pending_);
  pending_.clear();
}

}  // namespace ibdt::bootstrap
