// datatype/loop_builder.cc — builds and normalises loop programs.
#include <algorithm>
#include <utility>

#include "base/checked_math.h"
#include "datatype/loop_program.h"

namespace ibdt::datatype {
namespace {

bool hasDispls(NodeKind kind) { return kind != NodeKind::kRunVector && kind != NodeKind::kVector; }

Result<NodeRef> finished(Node node, int64_t shift) {
  IBDT_RETURN_IF_ERROR(finishNode(node));
  return NodeRef{std::make_shared<const Node>(std::move(node)), shift};
}

// All blocks are single runs: merge neighbours that touch, then pick the
// cheapest leaf kind (one run, strided runs, fixed-size runs, indexed runs).
Result<NodeRef> runsToLeaf(std::vector<int64_t> displs, std::vector<int64_t> lengths) {
  size_t out = 0;
  for (size_t i = 1; i < displs.size(); ++i) {
    if (displs[out] + lengths[out] == displs[i]) {
      lengths[out] += lengths[i];
    } else {
      ++out;
      displs[out] = displs[i];
      lengths[out] = lengths[i];
    }
  }
  displs.resize(out + 1);
  lengths.resize(out + 1);
  if (displs.size() == 1) return makeRun(lengths[0], displs[0]);

  const bool sameLength = std::all_of(lengths.begin(), lengths.end(), [&](int64_t l) { return l == lengths[0]; });
  const int64_t stride = displs[1] - displs[0];
  bool arithmetic = sameLength;
  for (size_t i = 2; arithmetic && i < displs.size(); ++i) arithmetic = displs[i] - displs[i - 1] == stride;

  Node node;
  node.count = static_cast<int64_t>(displs.size());
  if (arithmetic) {
    node.kind = NodeKind::kRunVector;
    node.runBytes = lengths[0];
    node.stride = stride;
    return finished(std::move(node), displs[0]);
  }
  const int64_t base = displs[0];
  for (int64_t& d : displs) d -= base;
  node.displs = std::move(displs);
  if (sameLength) {
    node.kind = NodeKind::kRunBlockIndexed;
    node.runBytes = lengths[0];
  } else {
    node.kind = NodeKind::kRunIndexed;
    node.lengths = std::move(lengths);
  }
  return finished(std::move(node), base);
}

}  // namespace

Status finishNode(Node& node) {
  if (node.count < 1) return makeError(Code::kInvalidArgument, "loop node with count ", node.count);
  const bool leaf = node.isLeaf();
  const size_t n = static_cast<size_t>(node.count);
  if (hasDispls(node.kind) && node.displs.size() != n) {
    return makeError(Code::kInvalidArgument, "loop node: ", node.displs.size(), " displacements for ", n, " blocks");
  }
  const size_t wantChildren = leaf ? 0 : (node.kind == NodeKind::kStruct ? n : 1);
  if (node.children.size() != wantChildren) {
    return makeError(Code::kInvalidArgument, "loop node: ", node.children.size(), " children, expected ", wantChildren);
  }
  if (node.kind == NodeKind::kRunIndexed && node.lengths.size() != n) {
    return makeError(Code::kInvalidArgument, "loop node: ", node.lengths.size(), " run lengths for ", n, " runs");
  }
  if ((node.kind == NodeKind::kRunVector || node.kind == NodeKind::kRunBlockIndexed) && node.runBytes < 1) {
    return makeError(Code::kInvalidArgument, "loop node: run of ", node.runBytes, " bytes");
  }
  node.depth = 1;
  for (const NodePtr& c : node.children) {
    if (!c || c->size < 1) return makeError(Code::kInvalidArgument, "loop node: empty child");
    node.depth = std::max(node.depth, c->depth + 1);
  }
  if (node.depth > kMaxDepth) {
    return makeError(Code::kUnsupported, "loop program nested deeper than ", kMaxDepth, " levels");
  }

  Checked m;
  int64_t lo = INT64_MAX;
  int64_t hi = INT64_MIN;
  auto place = [&](int64_t at, int64_t childLo, int64_t childHi) {
    lo = std::min(lo, m.add(at, childLo));
    hi = std::max(hi, m.add(at, childHi));
  };
  const bool variable = node.kind == NodeKind::kRunIndexed || node.kind == NodeKind::kStruct;
  if (variable) node.prefix.assign(n + 1, 0);
  int64_t size = 0;
  // Fixed-size kinds: every block is one run (leaf) or one child instance.
  const int64_t unit = leaf ? node.runBytes : node.children[0]->size;
  const int64_t unitLo = leaf ? 0 : node.children[0]->lo;
  const int64_t unitHi = leaf ? node.runBytes : node.children[0]->hi;
  switch (node.kind) {
    case NodeKind::kRunVector:
    case NodeKind::kVector:
      size = m.mul(node.count, unit);
      place(0, unitLo, unitHi);
      place(m.mul(node.count - 1, node.stride), unitLo, unitHi);
      break;
    case NodeKind::kRunBlockIndexed:
    case NodeKind::kBlockIndexed:
      size = m.mul(node.count, unit);
      for (int64_t d : node.displs) place(d, unitLo, unitHi);
      break;
    case NodeKind::kRunIndexed:
    case NodeKind::kStruct:
      for (size_t i = 0; i < n; ++i) {
        const int64_t len = leaf ? node.lengths[i] : node.children[i]->size;
        if (len < 1) return makeError(Code::kInvalidArgument, "loop node: run ", i, " of ", len, " bytes");
        if (leaf) {
          place(node.displs[i], 0, len);
        } else {
          place(node.displs[i], node.children[i]->lo, node.children[i]->hi);
        }
        size = m.add(size, len);
        node.prefix[i + 1] = size;
      }
      break;
  }
  if (m.overflow) return makeError(Code::kOverflow, "loop node: size or displacement exceeds 64 bits");
  node.size = size;
  node.lo = lo;
  node.hi = hi;
  return Status::ok();
}

NodeRef makeRun(int64_t bytes, int64_t at) {
  if (bytes <= 0) return {};
  auto node = std::make_shared<Node>();
  node->kind = NodeKind::kRunVector;
  node->count = 1;
  node->runBytes = bytes;
  node->size = bytes;
  node->lo = 0;
  node->hi = bytes;
  return {std::move(node), at};
}

Result<NodeRef> makeRepeat(int64_t count, int64_t stride, const NodeRef& child) {
  if (child.empty() || count <= 0) return NodeRef{};
  if (count == 1) return child;
  const Node& c = *child.node;
  Node node;
  if (c.isSingleRun() && stride == c.runBytes) return makeRun(count * c.runBytes, child.shift);
  int64_t span = 0;  // where the child's next block would start
  const bool continues = (c.kind == NodeKind::kRunVector || c.kind == NodeKind::kVector) &&
                         !__builtin_mul_overflow(c.count, c.stride, &span) && stride == span;
  if (continues) {  // loop fusion: the outer loop extends the inner one
    node = c;
    node.count = count * c.count;
  } else if (c.isSingleRun()) {
    node.kind = NodeKind::kRunVector;
    node.count = count;
    node.runBytes = c.runBytes;
    node.stride = stride;
  } else {
    node.kind = NodeKind::kVector;
    node.count = count;
    node.stride = stride;
    node.children = {child.node};
  }
  return finished(std::move(node), child.shift);
}

Result<NodeRef> makeBlocks(std::span<const NodeRef> blocks, std::span<const int64_t> at) {
  std::vector<size_t> used;
  used.reserve(blocks.size());
  bool allRuns = true;
  bool sameNode = true;
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i].empty()) continue;
    if (!used.empty() && blocks[i].node != blocks[used[0]].node) sameNode = false;
    allRuns = allRuns && blocks[i].node->isSingleRun();
    used.push_back(i);
  }
  if (used.empty()) return NodeRef{};
  auto where = [&](size_t i) { return at[i] + blocks[i].shift; };
  if (used.size() == 1) return NodeRef{blocks[used[0]].node, where(used[0])};

  std::vector<int64_t> displs(used.size());
  for (size_t k = 0; k < used.size(); ++k) displs[k] = where(used[k]);
  if (allRuns) {
    std::vector<int64_t> lengths(used.size());
    for (size_t k = 0; k < used.size(); ++k) lengths[k] = blocks[used[k]].node->runBytes;
    return runsToLeaf(std::move(displs), std::move(lengths));
  }
  const int64_t base = displs[0];
  for (int64_t& d : displs) d -= base;
  Node node;
  node.count = static_cast<int64_t>(used.size());
  if (sameNode) {
    const int64_t stride = displs[1];
    bool arithmetic = true;
    for (size_t k = 2; arithmetic && k < displs.size(); ++k) arithmetic = displs[k] - displs[k - 1] == stride;
    if (arithmetic) return makeRepeat(node.count, stride, NodeRef{blocks[used[0]].node, base});
    node.kind = NodeKind::kBlockIndexed;
    node.children = {blocks[used[0]].node};
  } else {
    node.kind = NodeKind::kStruct;
    for (size_t k : used) node.children.push_back(blocks[k].node);
  }
  node.displs = std::move(displs);
  return finished(std::move(node), base);
}

}  // namespace ibdt::datatype
