#include "transport/fabric/shm/calibration.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/fastest.h"
#include "transport/fabric/shm/copy_distance.h"
#include "transport/fabric/shm/layout.h"
#include "transport/fabric/shm/remote_copy.h"

namespace ibdt::fabric::shm {

TransferCost calibrateTransfer(size_t page, bool crossMemoryAttach) {
  measureCrossMemorySlowDistances();  // before the copies below: they may be at such a distance
  constexpr size_t kPieces = 64;
  constexpr size_t kBulk = 4 << 20;  // beyond a core's L2: messages stream from memory
  std::vector<uint8_t> from(kBulk, 1), to(kBulk, 2);
  TransferCost cost;
  cost.initiatorCopies = true;  // no DMA engine: the initiating process copies
  double bulkCopy = fastestNs(3, [&] {
    std::memcpy(to.data(), from.data(), kBulk);
    asm volatile("" : : "r"(to.data()) : "memory");
  });
  cost.allocatedBytesPerNs = kBulk / std::max(bulkCopy, 1.0);
  cost.allocatedPerRequestNs = 50;  // a ring slot and a completion; no system call
  {
    // A gather into a mapped segment walks the local list and copies piece
    // by piece (copyRemote): 64 one-line pieces against one 4 KiB piece.
    std::vector<iovec> pieces, whole{{from.data(), kPieces * 64}};
    for (size_t i = 0; i < kPieces; ++i) pieces.push_back({from.data() + i * page, 64});
    RemotePiece mapped{reinterpret_cast<uint64_t>(to.data()), kPieces * 64, to.data()};
    auto gather = [&](const std::vector<iovec>& local) {
      return fastestNs(5, [&] { (void)copyRemote(Direction::kToPeer, getpid(), local, std::span(&mapped, 1)); });
    };
    cost.allocatedPerSgeNs = std::max(0.0, (gather(pieces) - gather(whole)) / (kPieces - 1));
  }
  if (!crossMemoryAttach) {
    cost.perRequestNs = 10'000;
    cost.perSgeNs = 0;
    cost.perRemotePageNs = 0;
    cost.bytesPerNs = cost.allocatedBytesPerNs / 2;  // two copies through the bounce buffer
    return cost;
  }
  pid_t self = getpid();
  auto writev = [&](std::vector<iovec>& local, std::vector<iovec>& remote) {
    return fastestNs(3, [&] {
      (void)process_vm_writev(self, local.data(), local.size(), remote.data(), remote.size(), 0);
    });
  };
  std::vector<iovec> local{{from.data(), 8}}, remote{{to.data(), 8}};
  double one = writev(local, remote);
  // 64 one-line pieces on distinct pages: each pins another remote page.
  local.clear();
  remote.clear();
  for (size_t i = 0; i < kPieces; ++i) {
    local.push_back({from.data() + i * 64, 64});
    remote.push_back({to.data() + i * page, 64});
  }
  double pages = writev(local, remote);
  // 64 local pieces into one remote page: the cost of a gather entry.
  remote.assign(1, {to.data(), kPieces * 64});
  double gather = writev(local, remote);
  // Bulk: the copy rate once the per-page work is accounted for.
  local.assign(1, {from.data(), kBulk});
  remote.assign(1, {to.data(), kBulk});
  double bulk = writev(local, remote);
  cost.perRequestNs = one;
  cost.perSgeNs = std::max(0.0, (gather - one) / (kPieces - 1));
  cost.perRemotePageNs = std::max(0.0, (pages - gather) / (kPieces - 1));
  double streaming = std::max(1.0, bulk - one - cost.perRemotePageNs * (kBulk / page));
  cost.bytesPerNs = kBulk / streaming;
  return cost;
}

}  // namespace ibdt::fabric::shm
