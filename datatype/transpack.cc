// datatype/transpack.cc — typed copy between two layouts of one signature
// (Träff et al. call it transpacking). A side that is one dense run is read
// or written in place; otherwise chunks go through a bounce buffer.
#include <algorithm>
#include <cstring>

#include "base/copy_bytes.h"
#include "datatype/type_impl.h"

namespace ibdt::datatype {

TypedCopy::TypedCopy(Segment from, Segment to)
    : from_(std::move(from)), to_(std::move(to)), srcDense_(from_.denseOffset()), dstDense_(to_.denseOffset()) {}

Result<TypedCopy> TypedCopy::create(const Datatype& srcType, int64_t srcCount, const Datatype& dstType,
                                    int64_t dstCount) {
  IBDT_ASSIGN_OR_RETURN(Segment from, Segment::create(srcType, srcCount));
  IBDT_ASSIGN_OR_RETURN(Segment to, Segment::create(dstType, dstCount));
  // The shorter description must be a prefix of the longer one.
  if (srcType.impl()->signature.elements * srcCount <= dstType.impl()->signature.elements * dstCount) {
    IBDT_RETURN_IF_ERROR(checkMatch(srcType, srcCount, dstType, dstCount));
  } else {
    IBDT_RETURN_IF_ERROR(checkMatch(dstType, dstCount, srcType, srcCount));
  }
  return TypedCopy(std::move(from), std::move(to));
}

Status TypedCopy::run(const void* src, void* dst, int64_t first, int64_t last) const {
  if (first < 0 || first > last || last > size()) {
    return makeError(Code::kOutOfRange, "transpack: byte range [", first, ", ", last, ") outside [0, ", size(), ")");
  }
  if (srcDense_ >= 0 && dstDense_ >= 0) {  // one run each side: a copy, not the engine's walk (an 8-byte own block)
    char* to = static_cast<char*>(dst) + dstDense_ + first;
    const char* from = static_cast<const char*>(src) + srcDense_ + first;
    const auto bytes = static_cast<size_t>(last - first);
    if (to < from + bytes && from < to + bytes) std::memmove(to, from, bytes);
    else copyBytes(to, from, bytes);
    return Status::ok();
  }
  if (srcDense_ >= 0) return to_.unpack(dst, first, last, static_cast<const char*>(src) + srcDense_ + first);
  if (dstDense_ >= 0) return from_.pack(src, first, last, static_cast<char*>(dst) + dstDense_ + first);
  alignas(64) char buffer[64 * 1024];
  for (int64_t at = first; at < last;) {
    const int64_t end = std::min<int64_t>(last, at + static_cast<int64_t>(sizeof(buffer)));
    IBDT_RETURN_IF_ERROR(from_.pack(src, at, end, buffer));
    IBDT_RETURN_IF_ERROR(to_.unpack(dst, at, end, buffer));
    at = end;
  }
  return Status::ok();
}

Status transpack(const void* src, const Datatype& srcType, int64_t srcCount, void* dst, const Datatype& dstType,
                 int64_t dstCount, int64_t first, int64_t last) {
  IBDT_ASSIGN_OR_RETURN(TypedCopy copy, TypedCopy::create(srcType, srcCount, dstType, dstCount));
  return copy.run(src, dst, first, last);
}

}  // namespace ibdt::datatype
