// datatype/loop_program.h — the compiled form of a datatype (Gropp, Lusk,
// Swider's "dataloops"): a small DAG of loop nodes over byte runs.
//
// Leaf kinds describe runs of bytes directly (the common case after merging);
// inner kinds place instances of child nodes. Every node is position
// independent: block i sits at i*stride (vector kinds) or displs[i] relative
// to the node's origin, and a NodeRef adds the origin shift. `size` is the
// packed bytes of one instance, [lo, hi) the bytes it touches.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "ibdt/status.h"

namespace ibdt::datatype {

enum class NodeKind : uint8_t {
  kRunVector = 1,     // count runs of runBytes, i*stride (count 1: one run)
  kRunBlockIndexed,   // count runs of runBytes at displs[i]
  kRunIndexed,        // count runs of lengths[i] at displs[i]
  kVector,            // count instances of children[0] at i*stride
  kBlockIndexed,      // count instances of children[0] at displs[i]
  kStruct,            // count instances of children[i] at displs[i]
};

struct Node {
  NodeKind kind = NodeKind::kRunVector;
  int64_t count = 0;
  int64_t runBytes = 0;
  int64_t stride = 0;
  std::vector<int64_t> displs;
  std::vector<int64_t> lengths;
  std::vector<int64_t> prefix;  // kRunIndexed/kStruct: packed offset of block i (count+1 entries)
  std::vector<std::shared_ptr<const Node>> children;
  int64_t size = 0;
  int64_t lo = 0;
  int64_t hi = 0;
  int depth = 1;

  bool isLeaf() const { return kind <= NodeKind::kRunIndexed; }
  bool isSingleRun() const { return kind == NodeKind::kRunVector && count == 1; }
  // Packed size of block i (inner kinds: one child instance).
  const Node& child(int64_t i) const {
    return *children[kind == NodeKind::kStruct ? static_cast<size_t>(i) : 0];
  }
};

using NodePtr = std::shared_ptr<const Node>;

// A node placed at `shift` bytes from the buffer base. node == nullptr: no data.
struct NodeRef {
  NodePtr node;
  int64_t shift = 0;
  bool empty() const { return node == nullptr; }
  int64_t size() const { return node ? node->size : 0; }
};

// Deepest loop nest accepted (from types or from the wire).
inline constexpr int kMaxDepth = 64;

// --- Builders. They normalise as they go: adjacent runs merge, vectors of
// runs whose stride continues the pattern fuse, uniform blocks become vectors.
// Callers guarantee that all arithmetic fits (types check their bounds).
NodeRef makeRun(int64_t bytes, int64_t at);
Result<NodeRef> makeRepeat(int64_t count, int64_t stride, const NodeRef& child);
// blocks[i] placed at at[i] bytes (added to its own shift).
Result<NodeRef> makeBlocks(std::span<const NodeRef> blocks, std::span<const int64_t> at);

// Fills size, lo, hi, depth and prefix of a node whose shape fields are set,
// checking every sum and product; used by the builders and the wire decoder.
Status finishNode(Node& node);

}  // namespace ibdt::datatype
