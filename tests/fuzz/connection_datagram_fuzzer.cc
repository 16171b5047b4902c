// tests/fuzz/connection_datagram_fuzzer.cc — lazy-connection datagrams
// (transport/messaging/connection.h) as any process that reaches a rank's
// listener may send them: decode must accept exactly the well-formed ones
// and encode must give the same bytes back (nothing is silently dropped or
// invented); everything else is a kProtocol error, never a crash. The same
// bytes are also opened as a sealed datagram (connection_auth.h): only a
// tag computed with the key opens, and what opens is the bytes before it.
#include <cstdint>
#include <cstring>
#include <span>

#include "fuzz/fuzz_check.h"
#include "transport/messaging/connection.h"
#include "transport/messaging/connection_auth.h"

using ibdt::Code;
using namespace ibdt::messaging;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  static const connection::DatagramKey key{{0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull}};
  auto opened = connection::unseal(bytes, key);
  if (opened.isOk()) {
    IBDT_FUZZ_CHECK(opened->data() == data && opened->size() + connection::kTagBytes == size, "unseal lost bytes");
  } else {
    IBDT_FUZZ_CHECK(opened.status().code() == Code::kProtocol, "unseal failed with %s",
                    opened.status().toString().c_str());
  }
  auto datagram = connection::decode(bytes);
  if (!datagram.isOk()) {
    IBDT_FUZZ_CHECK(datagram.status().code() == Code::kProtocol, "decode failed with %s",
                    datagram.status().toString().c_str());
    return 0;
  }
  IBDT_FUZZ_CHECK(
      datagram->address.data() >= data && datagram->address.data() + datagram->address.size() <= data + size,
      "the address points outside the datagram");
  auto again = connection::encode(*datagram);
  IBDT_FUZZ_CHECK(again.size() == size && std::memcmp(again.data(), data, size) == 0,
                  "decode then encode changed a %zu-byte datagram", size);
  connection::seal(again, key);
  auto reopened = connection::unseal(again, key);
  IBDT_FUZZ_CHECK(reopened.isOk() && reopened->size() == size, "a sealed datagram does not open");
  return 0;
}
