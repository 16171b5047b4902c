// bootstrap/store_wire.h — the binary protocol between ibdt-run's store
// server and its clients.
//
// A frame is a little-endian u32 payload length followed by the payload:
// u8 op, u64 request id, then the op's fields. Strings and blobs are a u32
// length and the bytes. Every request gets exactly one kReply frame carrying
// the same id, a Code and a message (empty when ok), then the reply fields:
//   kHello  u32 version, blob token, u32 rank -> u32 size, localRank,
//           localSize, nodeId, numNodes
//   kCommit u32 count, count x (blob key, blob value) -> nothing
//   kFence  u64 timeout ms                      -> nothing
//   kGet    u32 rank, blob key, u64 timeout ms  -> blob value
// Timeouts are relative and enforced by the server (kNoTimeout = never), so
// the stream never carries a reply nobody waits for.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ibdt/status.h"

namespace ibdt::bootstrap::wire {

enum class Op : uint8_t { kHello = 1, kCommit = 2, kFence = 3, kGet = 4, kReply = 0x80 };

constexpr uint32_t kVersion = 1;
constexpr uint32_t kMaxFrame = 256u << 20;  // rejects garbage lengths from strangers
constexpr uint64_t kNoTimeout = UINT64_MAX;

class Writer {
 public:
  // A frame: length prefix, op and request id, then the fields added.
  Writer(Op op, uint64_t id);
  // Bare fields, to be appended to a frame with raw().
  Writer() = default;
  Writer& u8(uint8_t value);
  Writer& u32(uint32_t value);
  Writer& u64(uint64_t value);
  Writer& blob(std::string_view bytes);
  Writer& raw(std::string_view bytes);
  // The finished frame, length prefix included (moves the bytes out).
  std::string frame();
  // The bare fields of a default-constructed writer (moves the bytes out).
  std::string fields() { return std::move(out_); }

 private:
  std::string out_;
};

// Reads fields in order; a short or malformed payload sets a sticky error
// (every later read returns zero) reported by finish().
class Reader {
 public:
  explicit Reader(std::string_view payload) : in_(payload) {}
  uint8_t u8();
  uint32_t u32();
  uint64_t u64();
  std::string_view blob();
  // Everything not read yet.
  std::string_view rest();
  // Bytes not read yet: a count read from the payload is checked against
  // this before anything is allocated or looped for it.
  size_t remaining() const { return failed_ ? 0 : in_.size(); }
  // A read ran past the end: every later read is void, so stop parsing.
  bool failed() const { return failed_; }
  // kProtocol when a read ran past the end or bytes are left over.
  Status finish(std::string_view what) const;

 private:
  bool take(void* out, size_t size);
  std::string_view in_;
  bool failed_ = false;
};

// Decodes the length prefix of a frame.
uint32_t frameLength(const char header[4]);

// The Code byte of a reply; a byte that names no Code is the server
// breaking the protocol (kProtocol), not an error nobody can name.
Code replyCode(uint8_t byte);

}  // namespace ibdt::bootstrap::wire
