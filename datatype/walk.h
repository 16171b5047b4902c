// datatype/walk.h — visits the byte runs of a loop program, or of any packed
// byte range [lo, hi) of it, in type-map order.
//
// An Op receives runs as offsets from the buffer base:
//   bool run(int64_t at, int64_t bytes)
//   bool runs(int64_t at, int64_t count, int64_t bytes, int64_t stride)
//   bool runsAt(int64_t origin, const int64_t* displs, int64_t count, int64_t bytes)
// The batch forms let pack/unpack use kernels specialised on the run size.
// Returning false stops the walk (used when an output array is full).
// Seeking to lo costs O(depth) divisions or binary searches.
#pragma once

#include <algorithm>

#include "datatype/loop_program.h"

namespace ibdt::datatype {

template <typename Op>
class Walker {
 public:
  explicit Walker(Op& op) : op_(op) {}

  bool all(const Node& n, int64_t origin) {
    switch (n.kind) {
      case NodeKind::kRunVector:
        return n.count == 1 ? op_.run(origin, n.runBytes) : op_.runs(origin, n.count, n.runBytes, n.stride);
      case NodeKind::kRunBlockIndexed:
        return op_.runsAt(origin, n.displs.data(), n.count, n.runBytes);
      case NodeKind::kRunIndexed:
        for (int64_t i = 0; i < n.count; ++i) {
          if (!op_.run(origin + n.displs[i], n.lengths[i])) return false;
        }
        return true;
      case NodeKind::kVector: {
        const Node& c = *n.children[0];
        for (int64_t i = 0; i < n.count; ++i) {
          if (!all(c, origin + i * n.stride)) return false;
        }
        return true;
      }
      case NodeKind::kBlockIndexed:
      case NodeKind::kStruct:
        for (int64_t i = 0; i < n.count; ++i) {
          if (!all(n.child(i), origin + n.displs[i])) return false;
        }
        return true;
    }
    return true;
  }

  // Requires 0 <= lo < hi <= n.size.
  bool range(const Node& n, int64_t origin, int64_t lo, int64_t hi) {
    if (lo == 0 && hi == n.size) return all(n, origin);
    switch (n.kind) {
      case NodeKind::kRunVector:
      case NodeKind::kRunBlockIndexed:
        return fixedRuns(n, origin, lo, hi);
      case NodeKind::kVector:
      case NodeKind::kBlockIndexed:
        return fixedChildren(n, origin, lo, hi);
      case NodeKind::kRunIndexed:
      case NodeKind::kStruct:
        return variableBlocks(n, origin, lo, hi);
    }
    return true;
  }

 private:
  static int64_t position(const Node& n, int64_t block) {
    return (n.kind == NodeKind::kRunVector || n.kind == NodeKind::kVector) ? block * n.stride : n.displs[block];
  }

  bool fixedRuns(const Node& n, int64_t origin, int64_t lo, int64_t hi) {
    const int64_t b = n.runBytes;
    const int64_t first = lo / b;
    const int64_t last = (hi - 1) / b;
    if (first == last) return op_.run(origin + position(n, first) + (lo - first * b), hi - lo);
    if (!op_.run(origin + position(n, first) + (lo - first * b), (first + 1) * b - lo)) return false;
    const int64_t middle = last - first - 1;
    if (middle > 0) {
      const bool ok = n.kind == NodeKind::kRunVector
                          ? op_.runs(origin + (first + 1) * n.stride, middle, b, n.stride)
                          : op_.runsAt(origin, n.displs.data() + first + 1, middle, b);
      if (!ok) return false;
    }
    return op_.run(origin + position(n, last), hi - last * b);
  }

  bool fixedChildren(const Node& n, int64_t origin, int64_t lo, int64_t hi) {
    const Node& c = *n.children[0];
    const int64_t s = c.size;
    const int64_t first = lo / s;
    const int64_t last = (hi - 1) / s;
    if (first == last) return range(c, origin + position(n, first), lo - first * s, hi - first * s);
    if (!range(c, origin + position(n, first), lo - first * s, s)) return false;
    for (int64_t i = first + 1; i < last; ++i) {
      if (!all(c, origin + position(n, i))) return false;
    }
    return range(c, origin + position(n, last), 0, hi - last * s);
  }

  bool variableBlocks(const Node& n, int64_t origin, int64_t lo, int64_t hi) {
    const bool leaf = n.kind == NodeKind::kRunIndexed;
    int64_t i = std::upper_bound(n.prefix.begin(), n.prefix.end(), lo) - n.prefix.begin() - 1;
    for (; i < n.count && n.prefix[i] < hi; ++i) {
      const int64_t begin = std::max(lo, n.prefix[i]) - n.prefix[i];
      const int64_t end = std::min(hi, n.prefix[i + 1]) - n.prefix[i];
      const bool ok = leaf ? op_.run(origin + n.displs[i] + begin, end - begin)
                           : range(*n.children[i], origin + n.displs[i], begin, end);
      if (!ok) return false;
    }
    return true;
  }

  Op& op_;
};

}  // namespace ibdt::datatype
