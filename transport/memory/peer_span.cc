#include "transport/memory/peer_span.h"

#include <algorithm>
#include <limits>

namespace ibdt::memory {

int64_t maxPeerSpan(int64_t dataBytes) {
  dataBytes = std::max<int64_t>(0, dataBytes);
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t scaled = dataBytes > kMax / kPeerSpanDataFactor ? kMax : dataBytes * kPeerSpanDataFactor;
  int64_t slack = dataBytes > kMax - kPeerSpanSlackBytes ? kMax : dataBytes + kPeerSpanSlackBytes;
  return std::max(scaled, slack);
}

Status checkPeerSpan(int64_t spanBytes, int64_t dataBytes) {
  int64_t bound = maxPeerSpan(dataBytes);
  if (spanBytes <= bound) return Status::ok();
  return makeError(Code::kUnsupported, "one key over a ", spanBytes, "-byte span would grant a peer ",
                   spanBytes - dataBytes, " bytes beyond its ", dataBytes, " bytes of data (at most ", bound,
                   " bytes may be spanned: max(4 x data, data + 64 KiB))");
}

}  // namespace ibdt::memory
