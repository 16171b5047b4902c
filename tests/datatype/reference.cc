// tests/datatype/reference.cc — textbook type maps (see reference.h).
#include "reference.h"

#include <algorithm>
#include <functional>

namespace ibdt::datatype::testing {
namespace {

// Appends blen copies of c at disp (copy k at disp + k*extent(c)).
void place(Ref& out, const Ref& c, int64_t disp, int64_t blen) {
  for (int64_t k = 0; k < blen; ++k) {
    for (const RefEntry& e : c.map) out.map.push_back({disp + k * c.extent() + e.disp, e.kind});
  }
  if (blen > 0 && c.hasBounds) {
    const int64_t lo = disp + c.lb;
    const int64_t hi = disp + (blen - 1) * c.extent() + c.ub;
    out.lb = out.hasBounds ? std::min(out.lb, lo) : lo;
    out.ub = out.hasBounds ? std::max(out.ub, hi) : hi;
    out.hasBounds = true;
  }
}

void inherit(Ref& out, const Ref& c) {
  out.sticky = out.sticky || c.sticky;
  out.align = std::max(out.align, c.align);
}

Ref withBounds(Ref r, int64_t lb, int64_t ub) {
  r.lb = lb;
  r.ub = ub;
  r.hasBounds = true;
  r.sticky = true;
  return r;
}

}  // namespace

int64_t Ref::size() const {
  int64_t s = 0;
  for (const RefEntry& e : map) s += e.size();
  return s;
}
int64_t Ref::trueLb() const {
  int64_t lo = map.empty() ? 0 : INT64_MAX;
  for (const RefEntry& e : map) lo = std::min(lo, e.disp);
  return lo;
}
int64_t Ref::trueUb() const {
  int64_t hi = map.empty() ? 0 : INT64_MIN;
  for (const RefEntry& e : map) hi = std::max(hi, e.disp + e.size());
  return hi;
}

Ref refBasic(BasicKind kind) {
  Ref r;
  r.map = {{0, kind}};
  r.ub = basicSize(kind);
  r.hasBounds = true;
  r.align = kind == BasicKind::kLongDouble ? alignof(long double)
            : kind == BasicKind::kFloatComplex ? alignof(float)
            : kind == BasicKind::kDoubleComplex ? alignof(double)
                                               : basicSize(kind);
  return r;
}

Ref refHvector(int64_t count, int64_t blocklen, int64_t stride, const Ref& old) {
  Ref r;
  for (int64_t i = 0; i < count; ++i) place(r, old, i * stride, blocklen);
  inherit(r, old);
  return r;
}

Ref refHindexed(const std::vector<int64_t>& blens, const std::vector<int64_t>& displs, const Ref& old) {
  Ref r;
  for (size_t i = 0; i < blens.size(); ++i) place(r, old, displs[i], blens[i]);
  inherit(r, old);
  return r;
}

Ref refStruct(const std::vector<int64_t>& blens, const std::vector<int64_t>& displs, const std::vector<Ref>& types) {
  Ref r;
  for (size_t i = 0; i < blens.size(); ++i) {
    place(r, types[i], displs[i], blens[i]);
    inherit(r, types[i]);
  }
  if (r.hasBounds && !r.sticky) {  // MPI's epsilon: round the extent up to the alignment
    const int64_t extent = r.ub - r.lb;
    r.ub += (r.align - extent % r.align) % r.align;
  }
  return r;
}

Ref refResized(const Ref& old, int64_t lb, int64_t extent) { return withBounds(old, lb, lb + extent); }

Ref refSubarray(const std::vector<int64_t>& sizes, const std::vector<int64_t>& subsizes,
                const std::vector<int64_t>& starts, Order order, const Ref& old) {
  const size_t n = sizes.size();
  std::vector<int64_t> stride(n);
  int64_t total = old.extent();
  for (size_t k = 0; k < n; ++k) {  // fastest dimension first
    const size_t d = order == Order::kC ? n - 1 - k : k;
    stride[d] = total;
    total *= sizes[d];
  }
  Ref r;
  inherit(r, old);
  std::vector<int64_t> idx(n, 0);
  std::function<void(size_t, int64_t)> rec = [&](size_t level, int64_t disp) {
    if (level == n) {
      place(r, old, disp, 1);
      return;
    }
    const size_t d = order == Order::kC ? level : n - 1 - level;  // slowest dimension first
    for (int64_t i = 0; i < subsizes[d]; ++i) rec(level + 1, disp + (starts[d] + i) * stride[d]);
  };
  rec(0, 0);
  return withBounds(r, 0, total);
}

Ref refDarray(int64_t size, int64_t rank, const std::vector<int64_t>& gsizes, const std::vector<Distribution>& dists,
              const std::vector<int64_t>& dargs, const std::vector<int64_t>& psizes, Order order, const Ref& old) {
  (void)size;
  const size_t n = gsizes.size();
  std::vector<int64_t> coords(n);
  for (size_t d = n, r = static_cast<size_t>(rank); d-- > 0;) {
    coords[d] = static_cast<int64_t>(r % static_cast<size_t>(psizes[d]));
    r /= static_cast<size_t>(psizes[d]);
  }
  std::vector<std::vector<int64_t>> owned(n);
  for (size_t d = 0; d < n; ++d) {
    for (int64_t i = 0; i < gsizes[d]; ++i) {
      bool mine = true;
      if (dists[d] == Distribution::kBlock) {
        const int64_t blk = dargs[d] == kDefaultDistArg ? (gsizes[d] + psizes[d] - 1) / psizes[d] : dargs[d];
        mine = i / blk == coords[d];
      } else if (dists[d] == Distribution::kCyclic) {
        const int64_t k = dargs[d] == kDefaultDistArg ? 1 : dargs[d];
        mine = (i / k) % psizes[d] == coords[d];
      }
      if (mine) owned[d].push_back(i);
    }
  }
  std::vector<int64_t> stride(n);
  int64_t total = old.extent();
  for (size_t k = 0; k < n; ++k) {
    const size_t d = order == Order::kC ? n - 1 - k : k;
    stride[d] = total;
    total *= gsizes[d];
  }
  Ref r;
  inherit(r, old);
  std::function<void(size_t, int64_t)> rec = [&](size_t level, int64_t disp) {
    if (level == n) {
      place(r, old, disp, 1);
      return;
    }
    const size_t d = order == Order::kC ? level : n - 1 - level;
    for (int64_t i : owned[d]) rec(level + 1, disp + i * stride[d]);
  };
  rec(0, 0);
  return withBounds(r, 0, total);
}

Ref refBounded(int64_t bound, int64_t blocklen, int64_t stride, const Ref& old) {
  Ref r;
  inherit(r, old);
  int64_t last = -1;
  for (int64_t j = 0; j < bound; ++j) {
    if (j % stride < blocklen) {
      place(r, old, j * old.extent(), 1);
      last = j;
    }
  }
  if (last < 0) return r;
  return withBounds(r, old.lb, last * old.extent() + old.ub);
}

Ref refCircular(int64_t total, int64_t start, int64_t bound, int64_t blocklen, int64_t stride, const Ref& old) {
  Ref r;
  inherit(r, old);
  for (int64_t j = 0; j < bound; ++j) {
    if (j % stride < blocklen) place(r, old, ((start + j) % total) * old.extent(), 1);
  }
  return withBounds(r, old.lb, old.lb + total * old.extent());
}

Ref refBucket(int64_t maxBucket, const std::vector<int64_t>& counts, const Ref& old) {
  Ref r;
  inherit(r, old);
  for (size_t i = 0; i < counts.size(); ++i) {
    for (int64_t k = 0; k < counts[i]; ++k) {
      place(r, old, (static_cast<int64_t>(i) * maxBucket + k) * old.extent(), 1);
    }
  }
  return withBounds(r, old.lb, old.lb + static_cast<int64_t>(counts.size()) * maxBucket * old.extent());
}

std::vector<int64_t> refByteOffsets(const Ref& ref, int64_t count) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < count; ++i) {
    for (const RefEntry& e : ref.map) {
      for (int64_t b = 0; b < e.size(); ++b) out.push_back(i * ref.extent() + e.disp + b);
    }
  }
  return out;
}

std::vector<Block> refRuns(const Ref& ref, int64_t count) {
  std::vector<Block> out;
  for (int64_t off : refByteOffsets(ref, count)) {
    if (!out.empty() && out.back().offset + out.back().length == off) {
      ++out.back().length;
    } else {
      out.push_back({off, 1});
    }
  }
  return out;
}

}  // namespace ibdt::datatype::testing
