// The in-place alltoallv's copy rule (see inplace_copy.h).
#include "collectives/inplace_copy.h"

#include <algorithm>
#include <numeric>

namespace ibdt::collectives {

InPlaceCopyChoice chooseInPlaceCopies(const std::vector<int64_t>& sendcounts, int64_t itemSize, int64_t auxBytes) {
  const size_t size = sendcounts.size();
  InPlaceCopyChoice choice;
  choice.copied.assign(size, 0);
  choice.at.assign(size, 0);
  const int64_t capacity = auxBytes / itemSize;  // whole items in a
  const int64_t outgoing = std::accumulate(sendcounts.begin(), sendcounts.end(), int64_t{0});
  // All fit: copy all. Else half of a at most, so the blocks that stay in
  // the buffer keep at least half of a for their auxiliary buffers.
  const int64_t budget = outgoing <= capacity ? outgoing : capacity / 2;
  std::vector<size_t> bySize(size);
  std::iota(bySize.begin(), bySize.end(), size_t{0});
  std::stable_sort(bySize.begin(), bySize.end(), [&](size_t a, size_t b) { return sendcounts[a] < sendcounts[b]; });
  for (size_t peer : bySize) {
    if (sendcounts[peer] == 0 || choice.items + sendcounts[peer] > budget) continue;
    choice.copied[peer] = 1;
    choice.at[peer] = choice.items;
    choice.items += sendcounts[peer];
  }
  const bool allCopied = choice.items == outgoing;
  choice.auxBytes = allCopied ? 0 : std::max(itemSize, auxBytes - choice.items * itemSize);
  return choice;
}

}  // namespace ibdt::collectives
