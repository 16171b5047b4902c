#include "bootstrap/store_wire.h"

#include <cstring>

namespace ibdt::bootstrap::wire {
namespace {

// The protocol never leaves one host, but fix the byte order anyway.
template <typename T>
void appendLittleEndian(std::string& out, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

template <typename T>
T loadLittleEndian(const unsigned char* in) {
  T value = 0;
  for (size_t i = 0; i < sizeof(T); ++i) value |= static_cast<T>(in[i]) << (8 * i);
  return value;
}

}  // namespace

Writer::Writer(Op op, uint64_t id) {
  out_.resize(4);  // length, filled in by frame()
  u8(static_cast<uint8_t>(op));
  u64(id);
}

Writer& Writer::u8(uint8_t value) {
  out_.push_back(static_cast<char>(value));
  return *this;
}
Writer& Writer::u32(uint32_t value) {
  appendLittleEndian(out_, value);
  return *this;
}
Writer& Writer::u64(uint64_t value) {
  appendLittleEndian(out_, value);
  return *this;
}
Writer& Writer::blob(std::string_view bytes) {
  u32(static_cast<uint32_t>(bytes.size()));
  out_.append(bytes);
  return *this;
}

Writer& Writer::raw(std::string_view bytes) {
  out_.append(bytes);
  return *this;
}

std::string Writer::frame() {
  uint32_t length = static_cast<uint32_t>(out_.size() - 4);
  for (size_t i = 0; i < 4; ++i) out_[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  return std::move(out_);
}

uint32_t frameLength(const char header[4]) {
  return loadLittleEndian<uint32_t>(reinterpret_cast<const unsigned char*>(header));
}

Code replyCode(uint8_t byte) {
  return byte <= static_cast<uint8_t>(Code::kInternal) ? static_cast<Code>(byte) : Code::kProtocol;
}

bool Reader::take(void* out, size_t size) {
  if (failed_ || in_.size() < size) {
    failed_ = true;
    std::memset(out, 0, size);
    return false;
  }
  std::memcpy(out, in_.data(), size);
  in_.remove_prefix(size);
  return true;
}

uint8_t Reader::u8() {
  unsigned char raw[1];
  take(raw, sizeof(raw));
  return raw[0];
}
uint32_t Reader::u32() {
  unsigned char raw[4];
  take(raw, sizeof(raw));
  return loadLittleEndian<uint32_t>(raw);
}
uint64_t Reader::u64() {
  unsigned char raw[8];
  take(raw, sizeof(raw));
  return loadLittleEndian<uint64_t>(raw);
}
std::string_view Reader::blob() {
  uint32_t size = u32();
  if (failed_ || in_.size() < size) {
    failed_ = true;
    return {};
  }
  std::string_view bytes = in_.substr(0, size);
  in_.remove_prefix(size);
  return bytes;
}

std::string_view Reader::rest() {
  if (failed_) return {};
  std::string_view bytes = in_;
  in_ = {};
  return bytes;
}

Status Reader::finish(std::string_view what) const {
  if (failed_) return makeError(Code::kProtocol, what, ": message is truncated or malformed");
  if (!in_.empty()) return makeError(Code::kProtocol, what, ": ", in_.size(), " unexpected trailing bytes");
  return Status::ok();
}

}  // namespace ibdt::bootstrap::wire
