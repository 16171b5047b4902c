// transport/messaging/wire.h — control messages between messaging contexts.
//
// Every control message starts with a Header and travels as a SEND into one
// of the peer's eager receive buffers; Header::credits returns eager credits
// piggy-backed. Rendezvous data moves by RDMA; a WRITE_WITH_IMM carries the
// receiver's transfer id as immediate data. Peers are untrusted: every field
// is validated before use (parse* return Code::kProtocol).
#pragma once

#include <cstdint>
#include <cstring>
#include <span>

#include "ibdt/status.h"

namespace ibdt::messaging::wire {

enum class Kind : uint8_t {
  kEager = 1,  // Envelope + packed payload
  kRts,        // rendezvous request: Envelope + Rts
  kCts,        // rendezvous reply: Cts (+ receiver layout bytes)
  kPacked,     // P-RRS: the packed data is ready to be read (Packed)
  kFin,        // P-RRS: the receiver has read everything (Fin)
  kCredit,     // credits only (uses the reserved receive buffers)
  kRelease,    // unpack schemes: the receiver freed staging ring segments (Release)
  kClose,      // close(): nothing more follows from the sender (reserved buffers)
  kPipelined,  // first fragment of a pipelined eager message: Envelope + payload
  kFragment,   // next fragment of it: Fragment + payload
  kGiveBack,   // header only: spends a credit the sender gives back to the receiver's pool (eager_pool.h)
};

struct Header {
  Kind kind;
  uint8_t flags;  // kWantsCredits | kReclaim, only under IBDT_MSG_EAGER_POOL
  uint8_t pad[2];
  uint32_t credits;  // eager credits returned to the receiver of this message
};

// Header::flags (the shared eager pool, eager_pool.h).
// The sender ran out of credits with messages waiting: grant it more.
constexpr uint8_t kWantsCredits = 1;
// The receiver of this message asks for its credits beyond the guaranteed
// share back (kGiveBack), unless it is using them.
constexpr uint8_t kReclaim = 2;
constexpr uint8_t kKnownFlags = kWantsCredits | kReclaim;

struct Envelope {
  int32_t source;
  int32_t tag;
  uint32_t communicator;
  uint32_t pad;
  int64_t bytes;            // packed bytes of the whole message
  uint64_t signatureHash;   // of the sender's count x type
  int64_t signatureElements;
};

// A pipelined eager message's fragments follow its first one back to back
// on the connection (nothing else that starts a message comes between), each
// at the packed offset where the previous one ended.
struct Fragment {
  int64_t offset;
};

// Sender statistics for the receiver's decision (paper Section 5.2).
struct Rts {
  uint32_t senderTransfer;
  uint8_t senderContiguous;
  uint8_t senderWantsPack;
  uint8_t forcedScheme;  // Scheme the sender was told to use, kAuto if none
  uint8_t pad;
  int64_t blockCount;
  double meanBlock;
  double medianBlock;
  double stddevBlock;
};

enum class ReplyMode : uint8_t { kUnpack = 1, kZeroCopy = 2 };

struct Cts {
  uint32_t senderTransfer;
  uint32_t receiverTransfer;
  int64_t bytes;  // packed bytes the receiver accepts (prefix; 0 ends at once)
  ReplyMode mode;
  uint8_t scheme;          // kGeneric/kBcSpup/kRwgUp hint for kUnpack; 0 otherwise
  uint8_t receiverContiguous;
  uint8_t hasLayout;       // the layout bytes follow this struct
  uint32_t layoutBytes;
  // Where to write: unpack buffer (kUnpack) or registered user span (kZeroCopy).
  uint64_t remoteAddress;
  uint64_t remoteLength;
  uint64_t rkey;
  // kZeroCopy: the receiver's layout, the address its offsets are relative to.
  uint32_t typeId;
  uint32_t typeVersion;
  int64_t count;
  uint64_t baseAddress;
  int64_t segmentSize;
  // kUnpack: the staging buffer is a ring of this many segments (segment s
  // lands at (s mod ringSegments) * segmentSize); 0: it holds the whole message.
  uint32_t ringSegments;
  uint32_t pad2;
};

struct Packed {
  uint32_t receiverTransfer;
  uint32_t pad;
  uint64_t address;
  uint64_t length;
  uint64_t rkey;
};

// Segments of `segmentSize` bytes that carry `bytes` (the last may be short).
inline uint64_t segmentCount(int64_t bytes, int64_t segmentSize) {
  return segmentSize <= 0 ? 0 : static_cast<uint64_t>((bytes + segmentSize - 1) / segmentSize);
}

// Segments [0, segments) of a transfer are unpacked: their ring slots may be
// written again.
struct Release {
  uint32_t senderTransfer;
  uint32_t pad;
  uint64_t segments;
};

struct Fin {
  uint32_t senderTransfer;
  uint32_t pad;
};

// An eager receive buffer holds Header + Envelope + the eager limit, and
// every control message travels in one: the limit must leave room for the
// largest fixed one, a Cts (below it, a rendezvous reply cannot be sent).
constexpr int64_t kMinEagerLimit = static_cast<int64_t>(sizeof(Cts) - sizeof(Envelope));
static_assert(sizeof(Envelope) + sizeof(Rts) <= sizeof(Envelope) + kMinEagerLimit);
static_assert(sizeof(Packed) <= sizeof(Envelope) + kMinEagerLimit);

// Copies a trivially copyable struct out of untrusted bytes at `offset`.
template <typename T>
Result<T> read(std::span<const uint8_t> bytes, size_t offset) {
  if (offset > bytes.size() || bytes.size() - offset < sizeof(T)) {
    return makeError(Code::kProtocol, "control message too short: ", bytes.size(), " bytes, need ",
                     offset + sizeof(T));
  }
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

template <typename T>
size_t write(uint8_t* out, size_t offset, const T& value) {
  std::memcpy(out + offset, &value, sizeof(T));
  return offset + sizeof(T);
}

}  // namespace ibdt::messaging::wire
