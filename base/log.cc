#include "base/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <set>

#include "base/config.h"

namespace ibdt::log {
namespace {

constexpr int kUnset = -1;
std::atomic<int> gThreshold{kUnset};

std::mutex& lineMutex() {
  static std::mutex mutex;
  return mutex;
}

std::string& tagStorage() {
  static std::string tag = strCat("pid ", ::getpid());
  return tag;
}

const char* levelName(Level level) {
  switch (level) {
    case Level::kError: return "error";
    case Level::kWarn: return "warn";
    case Level::kInfo: return "info";
    case Level::kDebug: return "debug";
    case Level::kTrace: return "trace";
  }
  return "?";
}

Level loadThreshold() {
  auto value = config::getChoice("IBDT_LOG", {"error", "warn", "info", "debug", "trace"});
  if (!value.isOk()) {
    std::fprintf(stderr, "[ibdt] %s; using warn\n", value.status().toString().c_str());
    return Level::kWarn;
  }
  return static_cast<Level>(*value);
}

}  // namespace

Level threshold() {
  int current = gThreshold.load(std::memory_order_relaxed);
  if (current == kUnset) {
    current = static_cast<int>(loadThreshold());
    gThreshold.store(current, std::memory_order_relaxed);
  }
  return static_cast<Level>(current);
}

void setThreshold(Level level) { gThreshold.store(static_cast<int>(level), std::memory_order_relaxed); }

void setTag(std::string tag) {
  std::lock_guard<std::mutex> guard(lineMutex());
  tagStorage() = std::move(tag);
}

void write(Level level, const std::string& line) {
  std::lock_guard<std::mutex> guard(lineMutex());
  std::fprintf(stderr, "[ibdt %s %s] %s\n", tagStorage().c_str(), levelName(level), line.c_str());
}

void once(Level level, const char* key, const std::string& line) {
  static std::mutex mutex;
  static std::set<std::string> seen;
  {
    std::lock_guard<std::mutex> guard(mutex);
    if (!seen.insert(key).second) return;
  }
  if (enabled(level)) write(level, line);
}

}  // namespace ibdt::log
