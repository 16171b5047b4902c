// tests/datatype/generator.cc — seeded random types, engine and reference
// built from the same random choices.
#include <sstream>

#include "reference.h"

namespace ibdt::datatype::testing {
namespace {

constexpr BasicKind kLeafKinds[] = {BasicKind::kChar,   BasicKind::kInt16,      BasicKind::kInt32,
                                    BasicKind::kDouble, BasicKind::kLongDouble, BasicKind::kDoubleComplex,
                                    BasicKind::kUint8,  BasicKind::kFloat};

std::string list(const std::vector<int64_t>& v) {
  std::ostringstream out;
  out << "{";
  for (size_t i = 0; i < v.size(); ++i) out << (i ? "," : "") << v[i];
  out << "}";
  return out.str();
}

}  // namespace

int64_t TypeGenerator::small(int64_t hi) { return uniform(0, 7) == 0 ? 0 : uniform(std::min<int64_t>(1, hi), hi); }

RandomType TypeGenerator::leaf() {
  const BasicKind kind = kLeafKinds[uniform(0, std::size(kLeafKinds) - 1)];
  return {Datatype::basic(kind), refBasic(kind), basicName(kind)};
}

RandomType TypeGenerator::make(int depth, int64_t maxEntries) {
  if (depth <= 0) return leaf();
  RandomType c = make(uniform(0, 3) == 0 ? static_cast<int>(uniform(0, depth - 1)) : depth - 1, maxEntries);
  const Datatype& o = c.type;
  const Ref& r = c.ref;
  const int64_t e = r.extent();
  auto counts = [&](size_t n, int64_t lo, int64_t hi) {
    std::vector<int64_t> v(n);
    for (auto& x : v) x = lo == 0 ? small(hi) : uniform(lo, hi);
    return v;
  };
  Result<Datatype> t = Status(Code::kInternal, "unset");
  Ref ref;
  std::ostringstream d;
  switch (uniform(0, 15)) {
    case 0: {
      const int64_t n = small(4);
      t = Datatype::contiguous(n, o), ref = refHvector(1, n, 0, r), d << "contiguous(" << n;
      break;
    }
    case 1: {
      const int64_t n = small(4), b = small(3), s = uniform(-5, 5);
      t = Datatype::vector(n, b, s, o), ref = refHvector(n, b, s * e, r), d << "vector(" << n << "," << b << "," << s;
      break;
    }
    case 2: {
      const int64_t n = small(4), b = small(3), s = uniform(-64, 64);
      t = Datatype::hvector(n, b, s, o), ref = refHvector(n, b, s, r), d << "hvector(" << n << "," << b << "," << s;
      break;
    }
    case 3:
    case 4: {
      const size_t n = static_cast<size_t>(small(4));
      auto blens = counts(n, 0, 3), displs = counts(n, -6, 6);
      std::vector<int64_t> bytes(n);
      for (size_t i = 0; i < n; ++i) bytes[i] = displs[i] * e;
      if (uniform(0, 1)) {
        t = Datatype::indexed(blens, displs, o), d << "indexed(" << list(blens) << "," << list(displs);
      } else {
        t = Datatype::hindexed(blens, bytes, o), d << "hindexed(" << list(blens) << "," << list(bytes);
      }
      ref = refHindexed(blens, bytes, r);
      break;
    }
    case 5: {
      const size_t n = static_cast<size_t>(small(4));
      const int64_t b = small(3);
      auto displs = counts(n, -64, 64);
      t = Datatype::hindexedBlock(b, displs, o), d << "hindexed_block(" << b << "," << list(displs);
      ref = refHindexed(std::vector<int64_t>(n, b), displs, r);
      break;
    }
    case 6: {
      const size_t n = static_cast<size_t>(small(4));
      const int64_t b = small(3);
      auto displs = counts(n, -6, 6);
      std::vector<int64_t> bytes(n);
      for (size_t i = 0; i < n; ++i) bytes[i] = displs[i] * e;
      t = Datatype::indexedBlock(b, displs, o), d << "indexed_block(" << b << "," << list(displs);
      ref = refHindexed(std::vector<int64_t>(n, b), bytes, r);
      break;
    }
    case 7: {
      const size_t n = static_cast<size_t>(uniform(1, 3));
      std::vector<Datatype> types{o};
      std::vector<Ref> refs{r};
      d << "struct(" << c.description;
      for (size_t i = 1; i < n; ++i) {
        RandomType other = make(static_cast<int>(uniform(0, depth - 1)), maxEntries / 2);
        types.push_back(other.type);
        refs.push_back(other.ref);
        d << ";" << other.description;
      }
      auto blens = counts(n, 0, 2), displs = counts(n, -64, 64);
      t = Datatype::structType(blens, displs, types), ref = refStruct(blens, displs, refs);
      d << ";" << list(blens) << "," << list(displs) << ")";
      if (!t.isOk()) errors_.push_back(d.str() + ": " + t.status().toString());
      return t.isOk() ? RandomType{t.value(), ref, d.str()} : c;
    }
    case 8: {
      const int64_t lb = r.lb + uniform(-8, 8), ext = std::max<int64_t>(0, e + uniform(-8, 16));
      t = Datatype::resized(o, lb, ext), ref = refResized(r, lb, ext), d << "resized(" << lb << "," << ext;
      break;
    }
    case 9: {
      const size_t n = static_cast<size_t>(uniform(1, 3));
      std::vector<int64_t> sizes = counts(n, 1, 4), subs(n), starts(n);
      for (size_t i = 0; i < n; ++i) {
        subs[i] = small(sizes[i]);
        starts[i] = uniform(0, sizes[i] - subs[i]);
      }
      const Order order = uniform(0, 1) ? Order::kC : Order::kFortran;
      t = Datatype::subarray(sizes, subs, starts, order, o), ref = refSubarray(sizes, subs, starts, order, r);
      d << "subarray(" << list(sizes) << "," << list(subs) << "," << list(starts) << "," << (order == Order::kC ? "C" : "F");
      break;
    }
    case 10: {
      const size_t n = static_cast<size_t>(uniform(1, 2));
      std::vector<int64_t> g = counts(n, 1, 6), p = counts(n, 1, 3), args(n);
      std::vector<Distribution> dist(n);
      int64_t procs = 1;
      for (size_t i = 0; i < n; ++i) {
        dist[i] = static_cast<Distribution>(uniform(0, 2));
        if (dist[i] == Distribution::kNone) p[i] = 1;
        procs *= p[i];
        args[i] = kDefaultDistArg;
        if (dist[i] == Distribution::kCyclic && uniform(0, 1)) args[i] = uniform(1, 3);
        if (dist[i] == Distribution::kBlock && uniform(0, 1)) args[i] = (g[i] + p[i] - 1) / p[i] + uniform(0, 2);
      }
      const int64_t rank = uniform(0, procs - 1);
      const Order order = uniform(0, 1) ? Order::kC : Order::kFortran;
      t = Datatype::darray(procs, rank, g, dist, args, p, order, o);
      ref = refDarray(procs, rank, g, dist, args, p, order, r);
      d << "darray(" << procs << "," << rank << "," << list(g) << "," << list(args) << "," << list(p);
      break;
    }
    case 11:
      t = Datatype::dup(o), ref = r, d << "dup(";
      break;
    case 12: {
      const int64_t s = uniform(1, 5), b = small(s), bound = small(12);
      t = Datatype::boundedVector(bound, b, s, o), ref = refBounded(bound, b, s, r);
      d << "bounded(" << bound << "," << b << "," << s;
      break;
    }
    case 13: {
      const int64_t total = uniform(1, 12), start = uniform(0, total - 1), bound = small(total);
      const int64_t s = uniform(1, 5), b = small(s);
      t = Datatype::circularVector(total, start, bound, b, s, o), ref = refCircular(total, start, bound, b, s, r);
      d << "circular(" << total << "," << start << "," << bound << "," << b << "," << s;
      break;
    }
    default: {
      const int64_t m = small(4);
      auto cs = counts(static_cast<size_t>(small(4)), 0, m);
      t = Datatype::bucket(m, cs, o), ref = refBucket(m, cs, r), d << "bucket(" << m << "," << list(cs);
      break;
    }
  }
  if (!t.isOk()) {
    errors_.push_back(d.str() + ";" + c.description + "): " + t.status().toString());
    return c;
  }
  if (static_cast<int64_t>(ref.map.size()) > maxEntries) return c;
  d << ";" << c.description << ")";
  return {t.value(), ref, d.str()};
}

}  // namespace ibdt::datatype::testing
