// base/log.h — leveled logging to stderr.
//
// The level comes from IBDT_LOG (error, warn, info, debug, trace; default
// warn). Messages below the level cost one relaxed load and a branch. Each
// line is prefixed with "[ibdt <tag> <level>]", where the tag is the rank once
// the bootstrap knows it, else the pid.
#pragma once

#include <string>

#include "ibdt/status.h"

namespace ibdt::log {

enum class Level : int { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3, kTrace = 4 };

// Current threshold (read from IBDT_LOG on first use).
Level threshold();
inline bool enabled(Level level) { return static_cast<int>(level) <= static_cast<int>(threshold()); }
// Overrides the threshold (tests, tools).
void setThreshold(Level level);
// Sets the line prefix tag, e.g. "rank 3".
void setTag(std::string tag);
// Writes one line (adds the prefix and the newline). Thread-safe.
void write(Level level, const std::string& line);
// Emits `line` once per process for a given key (e.g. "cma-fallback").
void once(Level level, const char* key, const std::string& line);

}  // namespace ibdt::log

#define IBDT_LOG(level, ...)                                                        \
  do {                                                                              \
    if (::ibdt::log::enabled(::ibdt::log::Level::level)) {                          \
      ::ibdt::log::write(::ibdt::log::Level::level, ::ibdt::strCat(__VA_ARGS__)); \
    }                                                                               \
  } while (0)
