// The in-place alltoallv's control messages (see inplace_control_messages.h).
#include "collectives/inplace_control_messages.h"


namespace ibdt::collectives {
namespace {

// Offsets of each peer's message: the header, then the inline block padded
// to whole words.
std::vector<int64_t> layout(int rank, size_t headerWords, const std::vector<int64_t>& counts, int64_t itemSize) {
  std::vector<int64_t> at(counts.size() + 1, 0);
  for (size_t peer = 0; peer < counts.size(); ++peer) {
    int64_t words = static_cast<int64_t>(headerWords);
    if (static_cast<int>(peer) != rank && inPlaceInline(counts[peer], itemSize)) {
      words += (counts[peer] * itemSize + 7) / 8;
    }
    at[peer + 1] = at[peer] + words;
  }
  return at;
}

}  // namespace

InPlaceControlMessages::InPlaceControlMessages(int rank, size_t headerWords, const std::vector<int64_t>& sendcounts,
                                               const std::vector<int64_t>& recvcounts, int64_t itemSize)
    : header_(headerWords), sendcounts_(sendcounts),
      outAt_(layout(rank, headerWords, sendcounts, itemSize)), inAt_(layout(rank, headerWords, recvcounts, itemSize)) {
  out_.assign(static_cast<size_t>(outAt_.back()), 0);
  in_.assign(static_cast<size_t>(inAt_.back()), 0);
}

void InPlaceControlMessages::pack(std::byte* base, const std::vector<int64_t>& sdispls,
                                  const InPlaceElements& elements) {
  for (size_t peer = 0; peer < sendcounts_.size(); ++peer) {
    if (!sendsInline(static_cast<int>(peer))) continue;
    elements.copy(elements.at(base, sdispls[peer]), false,
                  reinterpret_cast<std::byte*>(out_.data() + outAt_[peer] + header_), true, sendcounts_[peer]);
  }
}

}  // namespace ibdt::collectives
