// datatype/derived_constructors.cc — constructors built from the basic forms:
// subarray, darray (MPI) and Träff's bounded vector, circular vector, bucket.
#include <algorithm>
#include <utility>

#include "base/checked_math.h"
#include "datatype/type_impl.h"

namespace ibdt::datatype {
namespace {

// Pieces of a selection: `unit`-sized elements, each piece at an element offset.
struct Pieces {
  std::vector<int64_t> displs;  // bytes
  std::vector<Datatype> types;
  Checked math;

  Status add(int64_t element, Result<Datatype> type, int64_t unitExtent) {
    if (!type.isOk()) return type.status();
    displs.push_back(math.mul(element, unitExtent));
    types.push_back(std::move(type).value());
    return Status::ok();
  }

  // Elements j in [j0, j1) with j % stride < blocklen, placed at element j + shift.
  Status select(int64_t j0, int64_t j1, int64_t blocklen, int64_t stride, int64_t shift, const Datatype& unit) {
    if (j0 >= j1 || blocklen == 0) return Status::ok();
    const int64_t e = unit.extent();
    int64_t s = j0 - j0 % stride;  // start of the block holding j0
    if (j0 - s < blocklen) {
      const int64_t end = std::min(s + blocklen, j1);
      IBDT_RETURN_IF_ERROR(add(math.add(j0, shift), Datatype::contiguous(end - j0, unit), e));
    }
    s = math.add(s, stride);
    if (s >= j1) return Status::ok();
    const int64_t full = j1 - s >= blocklen ? (j1 - s - blocklen) / stride + 1 : 0;
    if (full > 0) IBDT_RETURN_IF_ERROR(add(math.add(s, shift), Datatype::vector(full, blocklen, stride, unit), e));
    s = math.add(s, math.mul(full, stride));
    if (s < j1) IBDT_RETURN_IF_ERROR(add(math.add(s, shift), Datatype::contiguous(std::min(blocklen, j1 - s), unit), e));
    return Status::ok();
  }

  // The pieces as one type with the given bounds.
  Result<Datatype> build(const char* what, int64_t lb, int64_t extent) {
    if (math.overflow) return makeError(Code::kOverflow, what, ": displacement exceeds 64 bits");
    std::vector<int64_t> ones(types.size(), 1);
    IBDT_ASSIGN_OR_RETURN(Datatype all, Datatype::structType(ones, displs, types));
    return Datatype::resized(all, lb, extent);
  }
};

Status checkPattern(const char* what, int64_t blocklen, int64_t stride) {
  if (stride < 1) return makeError(Code::kInvalidArgument, what, ": stride ", stride, " must be >= 1");
  if (blocklen < 0 || blocklen > stride) {
    return makeError(Code::kInvalidArgument, what, ": block length ", blocklen, " not in [0, stride ", stride, "]");
  }
  return Status::ok();
}

Status checkSameLength(const char* what, size_t n, std::initializer_list<size_t> others) {
  if (n == 0) return makeError(Code::kInvalidArgument, what, ": no dimensions");
  for (size_t o : others) {
    if (o != n) return makeError(Code::kInvalidArgument, what, ": argument arrays differ in length");
  }
  return Status::ok();
}

}  // namespace

Result<Datatype> Datatype::boundedVector(int64_t bound, int64_t blocklen, int64_t stride, const Datatype& old) {
  IBDT_RETURN_IF_ERROR(checkHandle(old, "bounded_vector", false));
  IBDT_RETURN_IF_ERROR(checkPattern("bounded_vector", blocklen, stride));
  if (bound < 0) return makeError(Code::kInvalidArgument, "bounded_vector: negative bound ", bound);
  if (bound == 0 || blocklen == 0) return contiguous(0, old);
  Pieces pieces;
  IBDT_RETURN_IF_ERROR(pieces.select(0, bound, blocklen, stride, 0, old));
  const int64_t lastBlock = (bound - 1) - (bound - 1) % stride;
  const int64_t last = std::min(bound - 1, lastBlock + blocklen - 1);
  Checked m;
  const int64_t ub = m.add(m.mul(last, old.extent()), old.ub());
  if (m.overflow) return makeError(Code::kOverflow, "bounded_vector: extent exceeds 64 bits");
  return pieces.build("bounded_vector", old.lb(), ub - old.lb());
}

Result<Datatype> Datatype::circularVector(int64_t total, int64_t start, int64_t bound, int64_t blocklen,
                                          int64_t stride, const Datatype& old) {
  IBDT_RETURN_IF_ERROR(checkHandle(old, "circular_vector", false));
  IBDT_RETURN_IF_ERROR(checkPattern("circular_vector", blocklen, stride));
  if (total < 1) return makeError(Code::kInvalidArgument, "circular_vector: total ", total, " must be >= 1");
  if (start < 0 || start >= total) {
    return makeError(Code::kInvalidArgument, "circular_vector: start ", start, " not in [0, ", total, ")");
  }
  if (bound < 0 || bound > total) {
    return makeError(Code::kInvalidArgument, "circular_vector: bound ", bound, " not in [0, total ", total, "]");
  }
  Pieces pieces;
  const int64_t wrap = total - start;  // relative index that lands on element 0
  IBDT_RETURN_IF_ERROR(pieces.select(0, std::min(bound, wrap), blocklen, stride, start, old));
  IBDT_RETURN_IF_ERROR(pieces.select(wrap, bound, blocklen, stride, -wrap, old));
  Checked m;
  const int64_t extent = m.mul(total, old.extent());
  m.add(old.lb(), extent);
  if (m.overflow) return makeError(Code::kOverflow, "circular_vector: extent exceeds 64 bits");
  return pieces.build("circular_vector", old.lb(), extent);
}

Result<Datatype> Datatype::bucket(int64_t maxBucket, std::span<const int64_t> counts, const Datatype& old) {
  IBDT_RETURN_IF_ERROR(checkHandle(old, "bucket", false));
  if (maxBucket < 0) return makeError(Code::kInvalidArgument, "bucket: negative bucket size ", maxBucket);
  Checked m;
  std::vector<int64_t> displs(counts.size());
  const int64_t bucketBytes = m.mul(maxBucket, old.extent());
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] < 0 || counts[i] > maxBucket) {
      return makeError(Code::kInvalidArgument, "bucket: count[", i, "] = ", counts[i], " not in [0, ", maxBucket, "]");
    }
    displs[i] = m.mul(static_cast<int64_t>(i), bucketBytes);
  }
  const int64_t extent = m.mul(static_cast<int64_t>(counts.size()), bucketBytes);
  m.add(old.lb(), extent);
  if (m.overflow) return makeError(Code::kOverflow, "bucket: extent exceeds 64 bits");
  IBDT_ASSIGN_OR_RETURN(Datatype buckets, hindexed(counts, displs, old));
  return resized(buckets, old.lb(), extent);
}

Result<Datatype> Datatype::subarray(std::span<const int64_t> sizes, std::span<const int64_t> subsizes,
                                    std::span<const int64_t> starts, Order order, const Datatype& old) {
  IBDT_RETURN_IF_ERROR(checkHandle(old, "subarray", false));
  IBDT_RETURN_IF_ERROR(checkSameLength("subarray", sizes.size(), {subsizes.size(), starts.size()}));
  const size_t n = sizes.size();
  // Work in C order: dimension n-1 varies fastest.
  std::vector<int64_t> size(n), sub(n), start(n);
  for (size_t i = 0; i < n; ++i) {
    const size_t d = order == Order::kC ? i : n - 1 - i;
    size[i] = sizes[d];
    sub[i] = subsizes[d];
    start[i] = starts[d];
    if (size[i] < 1 || sub[i] < 0 || start[i] < 0 || start[i] > size[i] - sub[i]) {
      return makeError(Code::kInvalidArgument, "subarray: dimension ", d, ": size ", sizes[d], ", subsize ",
                       subsizes[d], ", start ", starts[d], " do not satisfy 0 <= start <= start+subsize <= size");
    }
  }
  Checked m;
  std::vector<int64_t> stride(n);
  stride[n - 1] = old.extent();
  for (size_t d = n - 1; d > 0; --d) stride[d - 1] = m.mul(stride[d], size[d]);
  const int64_t extent = m.mul(stride[0], size[0]);
  int64_t disp = 0;
  for (size_t d = 0; d < n; ++d) disp = m.add(disp, m.mul(start[d], stride[d]));
  if (m.overflow) return makeError(Code::kOverflow, "subarray: array extent exceeds 64 bits");
  IBDT_ASSIGN_OR_RETURN(Datatype t, contiguous(sub[n - 1], old));
  for (size_t d = n - 1; d > 0; --d) {
    IBDT_ASSIGN_OR_RETURN(t, hvector(sub[d - 1], 1, stride[d - 1], t));
  }
  const int64_t one = 1;
  IBDT_ASSIGN_OR_RETURN(Datatype placed, hindexed({&one, 1}, {&disp, 1}, t));
  return resized(placed, 0, extent);
}

Result<Datatype> Datatype::darray(int64_t size, int64_t rank, std::span<const int64_t> gsizes,
                                  std::span<const Distribution> distribs, std::span<const int64_t> dargs,
                                  std::span<const int64_t> psizes, Order order, const Datatype& old) {
  IBDT_RETURN_IF_ERROR(checkHandle(old, "darray", false));
  const size_t n = gsizes.size();
  IBDT_RETURN_IF_ERROR(checkSameLength("darray", n, {distribs.size(), dargs.size(), psizes.size()}));
  if (size < 1 || rank < 0 || rank >= size) {
    return makeError(Code::kInvalidArgument, "darray: rank ", rank, " not in [0, size ", size, ")");
  }
  Checked m;
  int64_t procs = 1;
  for (int64_t p : psizes) {
    if (p < 1) return makeError(Code::kInvalidArgument, "darray: process grid dimension ", p, " < 1");
    procs = m.mul(procs, p);
  }
  if (m.overflow || procs != size) {
    return makeError(Code::kInvalidArgument, "darray: process grid holds ", procs, " processes, not ", size);
  }
  std::vector<int64_t> coords(n);
  for (size_t d = n, r = static_cast<size_t>(rank); d-- > 0;) {  // row-major process grid
    coords[d] = static_cast<int64_t>(r % static_cast<size_t>(psizes[d]));
    r /= static_cast<size_t>(psizes[d]);
  }
  Datatype unit = old;
  int64_t unitExtent = old.extent();
  for (size_t i = 0; i < n; ++i) {
    const size_t d = order == Order::kC ? n - 1 - i : i;  // innermost dimension first
    const int64_t g = gsizes[d], p = psizes[d], c = coords[d], arg = dargs[d];
    if (g < 1) return makeError(Code::kInvalidArgument, "darray: global size ", g, " of dimension ", d, " < 1");
    if (arg != kDefaultDistArg && arg < 1) {
      return makeError(Code::kInvalidArgument, "darray: distribution argument ", arg, " of dimension ", d);
    }
    Pieces pieces;
    switch (distribs[d]) {
      case Distribution::kNone:
        if (p != 1) return makeError(Code::kInvalidArgument, "darray: dimension ", d, " is not distributed but has ", p, " processes");
        IBDT_RETURN_IF_ERROR(pieces.add(0, contiguous(g, unit), unitExtent));
        break;
      case Distribution::kBlock: {
        const int64_t block = arg == kDefaultDistArg ? (g + p - 1) / p : arg;
        if (m.mul(block, p) < g) {
          return makeError(Code::kInvalidArgument, "darray: block ", block, " x ", p, " processes < ", g, " in dimension ", d);
        }
        const int64_t first = m.mul(c, block);
        const int64_t mine = std::clamp<int64_t>(g - first, 0, block);
        IBDT_RETURN_IF_ERROR(pieces.add(first, contiguous(mine, unit), unitExtent));
        break;
      }
      case Distribution::kCyclic: {
        const int64_t k = arg == kDefaultDistArg ? 1 : arg;
        const int64_t first = m.mul(c, k);
        if (first < g) IBDT_RETURN_IF_ERROR(pieces.select(0, g - first, k, m.mul(p, k), first, unit));
        break;
      }
      default:
        return makeError(Code::kInvalidArgument, "darray: unknown distribution in dimension ", d);
    }
    const int64_t extent = m.mul(g, unitExtent);
    if (m.overflow) return makeError(Code::kOverflow, "darray: array extent exceeds 64 bits");
    IBDT_ASSIGN_OR_RETURN(unit, pieces.build("darray", 0, extent));
    unitExtent = extent;
  }
  return unit;
}

}  // namespace ibdt::datatype
