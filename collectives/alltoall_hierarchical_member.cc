// The hierarchical alltoall's part on every rank: its chunks to its
// node's leaders (gather, stage 0), its rows from them (scatter stage) and
// their unpacking (last stage); see collectives/alltoall_hierarchical.cc.
#include <algorithm>

#include "collectives/alltoall_hierarchical_builder.h"

namespace ibdt::collectives::hierarchical {

using datatype::Datatype;
using datatype::Segment;

// Whether the user's blocks `indices` (of a type with `stride` bytes from
// one block to the next) are one dense run in that order: a contiguous
// type, blocks back to back, consecutive indices (ranks in blocks on the
// nodes, one leader). Never in place, where the staging is what keeps a
// row from landing on blocks not yet sent.
bool MergedBuilder::denseRun(const Datatype& type, int64_t stride, const std::vector<int>& indices) const {
  if (args_.inPlace || indices.empty() || block_ == 0 || stride != block_ || !type.contiguous() || type.trueLb() != 0) {
    return false;
  }
  for (size_t k = 1; k < indices.size(); ++k) {
    if (indices[k] != indices[k - 1] + 1) return false;
  }
  return true;
}

// Every rank: pack and send its chunk to each leader of its node (stage
// 0), receive its row from each (scatter stage) and unpack the rows (last
// stage). A leader's own chunk and row live in its G and E.
Status MergedBuilder::buildMember() {
  const int node = layout_.myNode, me = comm_.rank();
  // Per leader of this node: the user's blocks of the chunk and the row it
  // trades with it, in their order, and whether either needs staging (not
  // with itself, whose chunk and row are in its G and E, nor for a dense run).
  struct Part {
    std::vector<int> group, indices;
    bool self = false, sendsInPlace = false, receivesInPlace = false;
  };
  std::vector<Part> parts;
  int64_t sendStaged = 0, recvStaged = 0;  // in blocks
  for (int j = 0; j < layout_.leaders[static_cast<size_t>(node)]; ++j) {
    Part part;
    part.group = layout_.handled(node, j);
    part.self = j == layout_.myLocal;
    for (int n : part.group) {
      for (int partner : partnersOn(n, me)) part.indices.push_back(groups_.rank[static_cast<size_t>(partner)]);
    }
    part.sendsInPlace = !part.self && denseRun(args_.sendtype, args_.sendStride, part.indices);
    part.receivesInPlace = !part.self && denseRun(args_.recvtype, args_.recvStride, part.indices);
    const auto blocks = static_cast<int64_t>(part.indices.size());
    if (!part.self && !part.sendsInPlace) sendStaged += blocks;
    if (!part.self && !part.receivesInPlace) recvStaged += blocks;
    parts.push_back(std::move(part));
  }
  std::byte* sendStage = plan_->scratch(static_cast<size_t>(sendStaged * block_));
  std::byte* recvStage = plan_->scratch(static_cast<size_t>(recvStaged * block_));
  for (size_t j = 0; j < parts.size(); ++j) {
    const Part& part = parts[j];
    const auto blocks = static_cast<int64_t>(part.indices.size());
    for (size_t g = 0, k = 0; g < part.group.size(); ++g) {
      const std::vector<int> partners = partnersOn(part.group[g], me);  // the same ranks as destinations and sources
      for (size_t q = 0; q < partners.size(); ++q, ++k) {
        const int index = part.indices[k];
        std::byte* packTo = sendStage + static_cast<int64_t>(k) * block_;
        std::byte* unpackFrom = recvStage + static_cast<int64_t>(k) * block_;
        if (part.self) {
          const NodeBlock& nb = nodeBlocks_[g];
          const auto mine = static_cast<size_t>(layout_.myLocal);
          packTo = gather_ + (nb.outAt[mine] + static_cast<int64_t>(q)) * block_;
          unpackFrom = inSlot(nb, partners[q], mine);
        }
        if (!part.sendsInPlace) packs_.push_back({const_cast<std::byte*>(args_.sendBlock(index)), packTo});
        if (!part.receivesInPlace) {
          (part.self ? ownUnpacks_ : unpacks_).push_back({args_.recvBlock(index), unpackFrom});
        }
      }
    }
    if (part.self) continue;
    const int leader = layout_.leaderRank(node, static_cast<int>(j));
    const std::byte* chunk = part.sendsInPlace ? args_.sendBlock(part.indices.front()) : sendStage;
    std::byte* row = part.receivesInPlace ? args_.recvBlock(part.indices.front()) : recvStage;
    IBDT_RETURN_IF_ERROR(plan_->addSend(0, chunk, blocks * block_, byte(), leader, gatherTag_));
    IBDT_RETURN_IF_ERROR(plan_->addRecv(scatterStage(), row, blocks * block_, byte(), leader, scatterTag_));
    if (!part.sendsInPlace) sendStage += blocks * block_;
    if (!part.receivesInPlace) recvStage += blocks * block_;
  }
  plan_->setBefore(0, [packs = packs_, segment = *sendSegment_, bytes = block_] {
    return run(packs, segment, bytes, /*pack=*/true);
  });
  auto unpack = [segment = *recvSegment_, bytes = block_](const std::vector<BlockCopy>& copies) {
    return run(copies, segment, bytes, /*pack=*/false);
  };
  plan_->setBefore(scatterStage(), [unpack, own = ownUnpacks_] { return unpack(own); });
  plan_->setBefore(scatterStage() + 1, [unpack, rows = unpacks_] { return unpack(rows); });
  return Status::ok();
}

Status MergedBuilder::run(const std::vector<BlockCopy>& copies, const Segment& segment, int64_t bytes, bool pack) {
  if (bytes == 0) return Status::ok();
  for (const BlockCopy& copy : copies) {
    IBDT_RETURN_IF_ERROR(pack ? segment.pack(copy.typed, 0, bytes, copy.packed)
                              : segment.unpack(copy.typed, 0, bytes, copy.packed));
  }
  return Status::ok();
}

}  // namespace ibdt::collectives::hierarchical
