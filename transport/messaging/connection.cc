// The connection datagram (connection.h): its encoding and its checks.
#include "transport/messaging/connection.h"

#include <algorithm>
#include <cstring>

namespace ibdt::messaging {
namespace connection {
namespace {

constexpr uint32_t kMagic = 0x49424443;  // "IBDC"

// magic(4) kind(1) pad(1) addressBytes(2) from(4) to(4) job(8) token(8)
// echo(8), then the address.
struct Fixed {
  uint32_t magic;
  uint8_t kind;
  uint8_t pad;
  uint16_t addressBytes;
  int32_t from;
  int32_t to;
  uint64_t job;
  uint64_t token;
  uint64_t echo;
};

}  // namespace

std::vector<uint8_t> encode(const Datagram& datagram) {
  Fixed fixed{kMagic,       static_cast<uint8_t>(datagram.kind), 0,
              static_cast<uint16_t>(datagram.address.size()),   datagram.from,
              datagram.to,  datagram.job, datagram.token, datagram.echo};
  std::vector<uint8_t> out(sizeof fixed + datagram.address.size());
  std::memcpy(out.data(), &fixed, sizeof fixed);
  std::copy(datagram.address.begin(), datagram.address.end(), out.begin() + sizeof fixed);
  return out;
}

Result<Datagram> decode(std::span<const uint8_t> bytes) {
  Fixed fixed{};
  if (bytes.size() < sizeof fixed) {
    return makeError(Code::kProtocol, "connection datagram of ", bytes.size(), " bytes is too short (", sizeof fixed,
                     " at least)");
  }
  std::memcpy(&fixed, bytes.data(), sizeof fixed);
  if (fixed.magic != kMagic) {
    return makeError(Code::kProtocol, "not a connection datagram (magic 0x", std::hex, fixed.magic, std::dec, ", ",
                     bytes.size(), " bytes)");
  }
  if (fixed.kind < static_cast<uint8_t>(Kind::kRequest) || fixed.kind > static_cast<uint8_t>(Kind::kReady)) {
    return makeError(Code::kProtocol, "connection datagram of unknown kind ", int{fixed.kind});
  }
  if (fixed.pad != 0) return makeError(Code::kProtocol, "connection datagram with a nonzero pad byte");
  if (bytes.size() != sizeof fixed + fixed.addressBytes) {
    return makeError(Code::kProtocol, "connection datagram of ", bytes.size(), " bytes declares a ",
                     fixed.addressBytes, "-byte address (", sizeof fixed + fixed.addressBytes, " bytes in all)");
  }
  Datagram datagram;
  datagram.kind = static_cast<Kind>(fixed.kind);
  datagram.from = fixed.from;
  datagram.to = fixed.to;
  datagram.job = fixed.job;
  datagram.token = fixed.token;
  datagram.echo = fixed.echo;
  datagram.address = bytes.subspan(sizeof fixed);
  return datagram;
}

}  // namespace connection

}  // namespace ibdt::messaging
