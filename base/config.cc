#include "base/config.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "base/log.h"
#include "base/parse_integer.h"

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
  const std::optional<int64_t> value = parseInteger<int64_t>(text);
  if (!value || *value < min || *value > max) {
    return badValue(name, text, strCat("an integer in [", min, ", ", max, "]"));
  }
  return *value;
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

Result<int> getChoice(std::string_view name, std::span<const std::string_view> choices) {
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

namespace {

std::vector<std::string_view> unknownNames() {
  std::vector<std::string_view> unknown;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view var(*entry);
    if (var.rfind("IBDT_", 0) != 0) continue;
    std::string_view name = var.substr(0, var.find('='));
    if (findKnob(name) == nullptr) unknown.push_back(name);
  }
  return unknown;
}

// Levenshtein distance; knob names are short, so the quadratic cost is nothing.
size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The declared knob nearest to `name`, if within a few edits.
const Knob* closestKnob(std::string_view name) {
  const Knob* best = nullptr;
  size_t bestDistance = 4;  // further than this is a different word, not a typo
  for (const Knob& knob : kKnobs) {
    size_t distance = editDistance(name, knob.name);
    if (distance < bestDistance) {
      best = &knob;
      bestDistance = distance;
    }
  }
  return best;
}

}  // namespace

std::string unknownVariables() {
  std::string unknown;
  for (std::string_view name : unknownNames()) unknown += strCat(unknown.empty() ? "" : ", ", name);
  return unknown;
}

std::string unknownVariablesWithSuggestions() {
  std::string unknown;
  for (std::string_view name : unknownNames()) {
    unknown += strCat(unknown.empty() ? "" : ", ", name);
    if (const Knob* near = closestKnob(name)) unknown += strCat(" (did you mean ", near->name, "?)");
  }
  return unknown;
}

void warnAboutUnknownVariables() {
  std::string unknown = unknownVariablesWithSuggestions();
  if (unknown.empty()) return;
  log::once(log::Level::kWarn, "unknown-ibdt-variables",
            strCat("ignoring unknown IBDT_* environment variables: ", unknown));
}

}  // namespace ibdt::config
