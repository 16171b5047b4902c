#include "base/config.h"

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <limits>

extern char** environ;

namespace ibdt::config {
namespace {

constexpr Knob kKnobs[] = {
#define IBDT_KNOB(name, def, description) {#name, def, description},
#include "base/config_knobs.def"
#undef IBDT_KNOB
};

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

Status badValue(std::string_view name, std::string_view value, std::string_view expected) {
  return makeError(Code::kInvalidArgument, name, "='", value, "' is invalid: expected ", expected);
}

}  // namespace

std::span<const Knob> knobs() { return kKnobs; }

const Knob* findKnob(std::string_view name) {
  for (const Knob& knob : kKnobs) {
    if (name == knob.name) return &knob;
  }
  return nullptr;
}

bool isSet(std::string_view name) { return std::getenv(std::string(name).c_str()) != nullptr; }

Result<std::string> getString(std::string_view name) {
  const Knob* knob = findKnob(name);
  if (knob == nullptr) return makeError(Code::kInternal, "configuration knob ", name, " is not declared in config_knobs.def");
  const char* value = std::getenv(knob->name);
  return std::string(value != nullptr ? value : knob->defaultValue);
}

Result<int64_t> getInt(std::string_view name, int64_t min, int64_t max) {
  IBDT_ASSIGN_OR_RETURN(std::string text, getString(name));
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return badValue(name, text, strCat("an integer in [", min, ", ", max, "]"));
  }
  if (value < min || value > max) return badValue(name, text, strCat("an integer in [", min, ", ", max, "]"));
  return value;
}

Result<uint64_t> parseSize(std::string_view text) {
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) return makeError(Code::kInvalidArgument, "not a size: '", text, "'");
  std::string_view suffix(end, text.data() + text.size() - end);
  unsigned shift = 0;
  if (suffix.empty()) {
    shift = 0;
  } else if (equalsIgnoreCase(suffix, "k") || equalsIgnoreCase(suffix, "kib") || equalsIgnoreCase(suffix, "kb")) {
    shift = 10;
  } else if (equalsIgnoreCase(suffix, "m") || equalsIgnoreCase(suffix, "mib") || equalsIgnoreCase(suffix, "mb")) {
    shift = 20;
  } else if (equalsIgnoreCase(suffix, "g") || equalsIgnoreCase(suffix, "gib") || equalsIgnoreCase(suffix, "gb")) {
    shift = 30;
  } else {
    return makeError(Code::kInvalidArgument, "unknown size suffix '", suffix, "' in '", text, "'");
  }
  if (shift != 0 && value > (std::numeric_limits<uint64_t>::max() >> shift)) {
    return makeError(Code::kOverflow, "size '", text, "' overflows 64 bits");
  }
  return value << shift;
}

Result<uint64_t> getSize(std::string_view name) {
  IBDT_ASSIGN_OR_RETURN(std::string text, getString(name));
  auto parsed = parseSize(text);
  if (!parsed.isOk()) return badValue(name, text, "a byte count such as 4096, 64K, 16M or 1G");
  return parsed;
}

Result<bool> parseBool(std::string_view text) {
  for (std::string_view yes : {"1", "true", "yes", "on"}) {
    if (equalsIgnoreCase(text, yes)) return true;
  }
  for (std::string_view no : {"0", "false", "no", "off"}) {
    if (equalsIgnoreCase(text, no)) return false;
  }
  return makeError(Code::kInvalidArgument, "not a boolean: '", text, "'");
}

Result<bool> getBool(std::string_view name) {
  IBDT_ASSIGN_OR_RETURN(std::string text, getString(name));
  auto parsed = parseBool(text);
  if (!parsed.isOk()) return badValue(name, text, "0/1, true/false, yes/no or on/off");
  return parsed;
}

Result<double> getDouble(std::string_view name) {
  IBDT_ASSIGN_OR_RETURN(std::string text, getString(name));
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno != 0 || !(value >= 0.0)) {
    return badValue(name, text, "a non-negative number");
  }
  return value;
}

Result<int> getChoice(std::string_view name, std::initializer_list<std::string_view> choices) {
  IBDT_ASSIGN_OR_RETURN(std::string text, getString(name));
  int index = 0;
  std::string accepted;
  for (std::string_view choice : choices) {
    if (equalsIgnoreCase(text, choice)) return index;
    accepted += (index == 0 ? "" : ", ");
    accepted += choice;
    ++index;
  }
  return badValue(name, text, strCat("one of ", accepted));
}

std::string unknownVariables() {
  std::string unknown;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view var(*entry);
    if (var.rfind("IBDT_", 0) != 0) continue;
    std::string_view name = var.substr(0, var.find('='));
    if (findKnob(name) == nullptr) {
      if (!unknown.empty()) unknown += ", ";
      unknown += name;
    }
  }
  return unknown;
}

}  // namespace ibdt::config
