// base/parse_integer.h — the one way text becomes an integer: the whole of
// it, in decimal, or nothing (no spaces, no suffix, no overflow wrapping).
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

namespace ibdt {

// The whole of `text` as a decimal T ("-3" only for a signed T); nullopt for
// empty text, any other character, or a value T cannot hold.
template <class T>
std::optional<T> parseInteger(std::string_view text) {
  static_assert(std::is_integral_v<T>);
  T value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// A number as names spell it ("bruck-radix-4", "hierarchical-8-per-node"):
// positive, no sign, no leading zero (so each value has one spelling), below
// `limit`.
inline std::optional<int64_t> parseCanonicalPositive(std::string_view text, int64_t limit) {
  if (text.empty() || text[0] < '1' || text[0] > '9') return std::nullopt;
  const std::optional<int64_t> value = parseInteger<int64_t>(text);
  if (!value || *value >= limit) return std::nullopt;
  return value;
}

}  // namespace ibdt
