// datatype/transpack.cc — typed copy between two layouts of one signature
// (Träff et al. call it transpacking): packs a chunk from the source layout
// into a bounce buffer and unpacks it into the destination layout.
#include <algorithm>

#include "datatype/type_impl.h"

namespace ibdt::datatype {

Status transpack(const void* src, const Datatype& srcType, int64_t srcCount, void* dst, const Datatype& dstType,
                 int64_t dstCount, int64_t first, int64_t last) {
  IBDT_ASSIGN_OR_RETURN(Segment from, Segment::create(srcType, srcCount));
  IBDT_ASSIGN_OR_RETURN(Segment to, Segment::create(dstType, dstCount));
  // The shorter description must be a prefix of the longer one.
  if (srcType.impl()->signature.elements * srcCount <= dstType.impl()->signature.elements * dstCount) {
    IBDT_RETURN_IF_ERROR(checkMatch(srcType, srcCount, dstType, dstCount));
  } else {
    IBDT_RETURN_IF_ERROR(checkMatch(dstType, dstCount, srcType, srcCount));
  }
  if (first < 0 || first > last || last > std::min(from.size(), to.size())) {
    return makeError(Code::kOutOfRange, "transpack: byte range [", first, ", ", last, ") outside [0, ",
                     std::min(from.size(), to.size()), ")");
  }
  alignas(64) char buffer[64 * 1024];
  for (int64_t at = first; at < last;) {
    const int64_t end = std::min<int64_t>(last, at + static_cast<int64_t>(sizeof(buffer)));
    IBDT_RETURN_IF_ERROR(from.pack(src, at, end, buffer));
    IBDT_RETURN_IF_ERROR(to.unpack(dst, at, end, buffer));
    at = end;
  }
  return Status::ok();
}

}  // namespace ibdt::datatype
