// base/config.h — configuration from IBDT_* environment variables.
//
// Every knob is declared once in base/config_knobs.def with its default and
// description. Getters validate the value and fail with a clear error naming
// the variable, the bad value and what is accepted; a bad value is never
// replaced by a silent default.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "ibdt/status.h"

namespace ibdt::config {

struct Knob {
  const char* name;
  const char* defaultValue;
  const char* description;
};

// All declared knobs, in declaration order.
std::span<const Knob> knobs();
const Knob* findKnob(std::string_view name);

// The raw value: the environment's if set, else the declared default.
Result<std::string> getString(std::string_view name);
// True when the variable is set in the environment (not just defaulted).
bool isSet(std::string_view name);
// Integer within [min, max].
Result<int64_t> getInt(std::string_view name, int64_t min, int64_t max);
// Byte size: a non-negative integer with optional K, M, G (powers of 1024) suffix.
Result<uint64_t> getSize(std::string_view name);
// 0/1, true/false, yes/no, on/off.
Result<bool> getBool(std::string_view name);
// Non-negative floating point number.
Result<double> getDouble(std::string_view name);
// One of `choices` (case-insensitive); returns its index.
Result<int> getChoice(std::string_view name, std::span<const std::string_view> choices);
inline Result<int> getChoice(std::string_view name, std::initializer_list<std::string_view> choices) {
  return getChoice(name, std::span<const std::string_view>(choices.begin(), choices.size()));
}

// Pure parsers shared by the getters (exposed for tests and tools).
Result<uint64_t> parseSize(std::string_view text);
Result<bool> parseBool(std::string_view text);

// IBDT_* variables present in the environment that are not declared knobs
// (likely typos).
std::string unknownVariables();
// The same, each with the closest declared knob when one is near
// ("IBDT_MSG_EAGER_LIMT (did you mean IBDT_MSG_EAGER_LIMIT?)"); empty when
// every IBDT_* name is known.
std::string unknownVariablesWithSuggestions();
// Logs unknownVariablesWithSuggestions() as a warning, once per process
// (called when a messaging context is created).
void warnAboutUnknownVariables();

}  // namespace ibdt::config
