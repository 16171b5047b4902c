#include "bootstrap/pmi1/pmi1_codec.h"

#include <map>

#include "base/parse_integer.h"

namespace ibdt::bootstrap::pmi1 {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int sextet(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-') return 62;
  if (c == '_') return 63;
  return -1;
}

uint64_t fnv1a(std::string_view text) {
  uint64_t hash = 1469598103934665603ull;
  for (char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

bool parseNumber(std::string_view text, size_t& out) {
  const std::optional<size_t> value = parseInteger<size_t>(text);
  if (value) out = *value;
  return value.has_value();
}

}  // namespace

std::string encodeBase64(std::span<const uint8_t> bytes) {
  std::string out;
  out.reserve((bytes.size() * 4 + 2) / 3);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t group = (uint32_t{bytes[i]} << 16) | (uint32_t{bytes[i + 1]} << 8) | bytes[i + 2];
    for (int shift = 18; shift >= 0; shift -= 6) out.push_back(kAlphabet[(group >> shift) & 63]);
  }
  size_t left = bytes.size() - i;
  if (left > 0) {
    uint32_t group = uint32_t{bytes[i]} << 16;
    if (left == 2) group |= uint32_t{bytes[i + 1]} << 8;
    out.push_back(kAlphabet[(group >> 18) & 63]);
    out.push_back(kAlphabet[(group >> 12) & 63]);
    if (left == 2) out.push_back(kAlphabet[(group >> 6) & 63]);
  }
  return out;
}

Result<std::vector<uint8_t>> decodeBase64(std::string_view text) {
  if (text.size() % 4 == 1) return makeError(Code::kProtocol, "base64 text of impossible length ", text.size());
  std::vector<uint8_t> out;
  out.reserve(text.size() * 3 / 4);
  uint32_t group = 0;
  int bits = 0;
  for (char c : text) {
    int value = sextet(c);
    if (value < 0) return makeError(Code::kProtocol, "invalid base64 character '", c, "'");
    group = (group << 6) | static_cast<uint32_t>(value);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<uint8_t>((group >> bits) & 0xff));
    }
  }
  return out;
}

std::string kvsKey(int rank, std::string_view key, size_t maxLength) {
  constexpr size_t kChunkSuffix = 8;  // "#" and up to 7 digits
  std::string full = strCat("i", rank, ".", key);
  if (full.size() + kChunkSuffix <= maxLength) return full;
  static constexpr char kHex[] = "0123456789abcdef";
  uint64_t hash = fnv1a(key);
  std::string hashed = strCat("i", rank, ".h");
  for (int shift = 60; shift >= 0; shift -= 4) hashed.push_back(kHex[(hash >> shift) & 15]);
  return hashed;
}

EncodedValue encodeValue(std::span<const uint8_t> bytes, size_t maxValueLength) {
  EncodedValue encoded;
  std::string text = encodeBase64(bytes);
  if (text.size() + 1 <= maxValueLength) {
    encoded.head = "v" + text;
    return encoded;
  }
  for (size_t at = 0; at < text.size(); at += maxValueLength) encoded.chunks.push_back(text.substr(at, maxValueLength));
  encoded.head = strCat("c", encoded.chunks.size(), ".", bytes.size());
  return encoded;
}

Result<Head> decodeHead(std::string_view head) {
  Head decoded;
  if (head.starts_with('v')) {
    decoded.isInline = true;
    IBDT_ASSIGN_OR_RETURN(decoded.inlineBytes, decodeBase64(head.substr(1)));
    return decoded;
  }
  size_t dot = head.find('.');
  if (!head.starts_with('c') || dot == std::string_view::npos || !parseNumber(head.substr(1, dot - 1), decoded.chunks) ||
      !parseNumber(head.substr(dot + 1), decoded.bytes)) {
    return makeError(Code::kProtocol, "malformed PMI-1 value head '", head.substr(0, 32), "'");
  }
  return decoded;
}

Result<std::vector<int>> decodeProcessMapping(std::string_view mapping, int size) {
  auto bad = [&](std::string_view why) {
    return makeError(Code::kProtocol, "PMI_process_mapping '", mapping, "': ", why);
  };
  std::string_view text = mapping;
  if (!text.starts_with("(vector,") || !text.ends_with(")")) return bad("expected (vector,(start,nodes,ranks),...)");
  text = text.substr(8, text.size() - 9);
  // One block per (start node, node count, ranks per node).
  std::vector<int> blockNodes;
  while (!text.empty()) {
    if (!text.starts_with('(')) return bad("expected '('");
    size_t close = text.find(')');
    if (close == std::string_view::npos) return bad("unbalanced parentheses");
    std::string_view triple = text.substr(1, close - 1);
    size_t numbers[3];
    for (size_t& number : numbers) {
      size_t comma = triple.find(',');
      if (!parseNumber(triple.substr(0, comma), number)) return bad("expected three numbers per block");
      triple = comma == std::string_view::npos ? std::string_view() : triple.substr(comma + 1);
    }
    if (!triple.empty()) return bad("more than three numbers in a block");
    if (numbers[1] == 0 || numbers[2] == 0 || numbers[1] > (1u << 20) || numbers[2] > (1u << 20)) {
      return bad("empty or absurd block");
    }
    for (size_t node = 0; node < numbers[1]; ++node) {
      blockNodes.insert(blockNodes.end(), numbers[2], static_cast<int>(numbers[0] + node));
    }
    text.remove_prefix(close + 1);
    if (text.starts_with(',')) text.remove_prefix(1);
  }
  if (blockNodes.empty()) return bad("no blocks");
  // The vector repeats when it describes fewer ranks than the job has.
  std::vector<int> nodeOf;
  std::map<int, int> dense;
  for (int rank = 0; rank < size; ++rank) {
    int node = blockNodes[static_cast<size_t>(rank) % blockNodes.size()];
    auto [it, added] = dense.emplace(node, static_cast<int>(dense.size()));
    nodeOf.push_back(it->second);
  }
  return nodeOf;
}

}  // namespace ibdt::bootstrap::pmi1
