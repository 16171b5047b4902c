// datatype/stats.cc — run statistics of count x type without listing runs.
//
// Each loop node is summarised as a histogram of its merged run lengths plus
// its first and last run (which may merge with a neighbour's). Repeats use a
// closed form, so a vector of a million blocks costs as much as one block.
#include <cmath>
#include <map>
#include <unordered_map>

#include "datatype/segment_program.h"
#include "datatype/type_impl.h"

namespace ibdt::datatype {
namespace {

struct Summary {
  int64_t blocks = 0;
  std::map<int64_t, int64_t> hist;  // run length -> number of runs
  int64_t firstStart = 0, firstLen = 0;
  int64_t lastStart = 0, lastLen = 0;

  int64_t lastEnd() const { return lastStart + lastLen; }

  static Summary run(int64_t start, int64_t len) {
    Summary s;
    s.blocks = 1;
    s.hist[len] = 1;
    s.firstStart = s.lastStart = start;
    s.firstLen = s.lastLen = len;
    return s;
  }

  void addHist(const Summary& other, int64_t times) {
    for (const auto& [len, n] : other.hist) hist[len] += n * times;
  }
  void mergeBoundary(int64_t leftLen, int64_t rightLen, int64_t times) {
    hist[leftLen] -= times;
    hist[rightLen] -= times;
    hist[leftLen + rightLen] += times;
  }

  // Appends `s` placed at `shift`, merging touching runs.
  void append(const Summary& s, int64_t shift) {
    if (s.blocks == 0) return;
    if (blocks == 0) {
      *this = s;
      firstStart += shift;
      lastStart += shift;
      return;
    }
    addHist(s, 1);
    if (lastEnd() == s.firstStart + shift) {
      const int64_t merged = lastLen + s.firstLen;
      mergeBoundary(lastLen, s.firstLen, 1);
      if (blocks == 1) firstLen = merged;
      blocks += s.blocks - 1;
      if (s.blocks == 1) {
        lastLen = merged;
        return;
      }
    } else {
      blocks += s.blocks;
    }
    lastStart = s.lastStart + shift;
    lastLen = s.lastLen;
  }

  // n copies of `s`, copy i at i*stride (or at displs[i]).
  static Summary repeat(const Summary& s, int64_t n, int64_t stride, const int64_t* displs) {
    auto at = [&](int64_t i) { return displs ? displs[i] : i * stride; };
    Summary out;
    if (s.blocks == 0 || n == 0) return out;
    if (s.blocks == 1 && displs) {
      for (int64_t i = 0; i < n; ++i) out.append(s, at(i));  // merges may chain: go one by one
      return out;
    }
    if (s.blocks == 1 && s.lastEnd() == s.firstStart + stride) return run(s.firstStart, n * s.firstLen);
    out = s;
    out.addHist(s, n - 1);
    out.blocks = n * s.blocks;
    int64_t merges = 0;
    for (int64_t i = 0; i + 1 < n; ++i) {
      if (!displs) {  // the same for every boundary
        merges = s.lastEnd() == s.firstStart + stride ? n - 1 : 0;
        break;
      }
      if (s.lastEnd() + at(i) == s.firstStart + at(i + 1)) ++merges;
    }
    if (merges > 0) out.mergeBoundary(s.lastLen, s.firstLen, merges);
    out.blocks -= merges;
    out.firstStart += at(0);
    out.lastStart += at(n - 1);
    return out;
  }
};

class Summarizer {
 public:
  const Summary& of(const Node& n) {
    auto it = memo_.find(&n);
    if (it != memo_.end()) return it->second;
    return memo_.emplace(&n, compute(n)).first->second;
  }

 private:
  Summary compute(const Node& n) {
    switch (n.kind) {
      case NodeKind::kRunVector:
        return Summary::repeat(Summary::run(0, n.runBytes), n.count, n.stride, nullptr);
      case NodeKind::kRunBlockIndexed:
        return Summary::repeat(Summary::run(0, n.runBytes), n.count, 0, n.displs.data());
      case NodeKind::kVector:
        return Summary::repeat(of(*n.children[0]), n.count, n.stride, nullptr);
      case NodeKind::kBlockIndexed:
        return Summary::repeat(of(*n.children[0]), n.count, 0, n.displs.data());
      case NodeKind::kRunIndexed:
      case NodeKind::kStruct: {
        Summary s;
        for (int64_t i = 0; i < n.count; ++i) {
          if (n.isLeaf()) {
            s.append(Summary::run(0, n.lengths[i]), n.displs[i]);
          } else {
            s.append(of(*n.children[i]), n.displs[i]);
          }
        }
        return s;
      }
    }
    return {};
  }

  std::unordered_map<const Node*, Summary> memo_;
};

}  // namespace

Result<Stats> stats(const Datatype& type, int64_t count) {
  IBDT_ASSIGN_OR_RETURN(Segment segment, Segment::create(type, count));
  Stats out;
  out.size = segment.size();
  out.extent = type.extent();
  out.trueExtent = type.trueExtent();
  const NodeRef& root = segment.program().root;
  if (root.empty()) {
    out.contiguous = true;
    return out;
  }
  Summarizer summarizer;
  const Summary& s = summarizer.of(*root.node);
  out.blockCount = s.blocks;
  out.contiguous = s.blocks == 1;
  out.meanBlock = static_cast<double>(out.size) / static_cast<double>(s.blocks);
  long double squares = 0;
  int64_t seen = 0;
  bool medianSet = false;
  for (const auto& [len, n] : s.hist) {
    if (n == 0) continue;
    const long double d = static_cast<long double>(len) - out.meanBlock;
    squares += d * d * static_cast<long double>(n);
    seen += n;
    if (!medianSet && seen > (s.blocks - 1) / 2) {
      out.medianBlock = static_cast<double>(len);
      medianSet = true;
    }
  }
  out.stddevBlock = static_cast<double>(std::sqrt(squares / static_cast<long double>(s.blocks)));
  return out;
}

}  // namespace ibdt::datatype
