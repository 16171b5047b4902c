// The in-place alltoallv's elements (see inplace_elements.h).
#include "collectives/inplace_elements.h"

#include <algorithm>
#include <cstring>

#include "collectives/alltoall_rounds.h"

namespace ibdt::collectives {
namespace {

using datatype::Block;
using datatype::Datatype;

// The pairwise check below is quadratic in the runs of one element.
constexpr int64_t kMaxRuns = 4096;

bool isDense(const Datatype& type) {
  return type.contiguous() && type.lb() == 0 && type.trueLb() == 0 && type.extent() == type.size();
}

int64_t floorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0); }

// Whether run `a` of the element k >= 1 positions later meets run `b` of
// this one: some k with a.offset + k e < b.end and a.end + k e > b.offset.
bool laterElementMeets(const Block& a, const Block& b, int64_t extent) {
  const int64_t above = b.offset - (a.offset + a.length);  // k e must exceed this
  const int64_t below = b.offset + b.length - a.offset;    // and stay under this
  const int64_t k = std::max<int64_t>(1, floorDiv(above, extent) + 1);
  return k * extent < below;
}

Result<std::vector<Block>> elementRuns(const Datatype& type) {
  IBDT_ASSIGN_OR_RETURN(datatype::Stats stats, datatype::stats(type, 1));
  if (stats.blockCount > kMaxRuns) {
    return makeError(Code::kInvalidArgument, "alltoallv in place: one element of the recvtype has ", stats.blockCount,
                     " runs of bytes; at most ", kMaxRuns, " can be checked for overlap");
  }
  return datatype::flatten(type, 1);
}

}  // namespace

Status checkInPlaceLayout(const Datatype& type) {
  if (type.size() == 0 || isDense(type)) return Status::ok();
  if (type.extent() <= 0) {
    return makeError(Code::kInvalidArgument, "alltoallv in place: the recvtype's extent is ", type.extent(),
                     "; consecutive elements would share bytes");
  }
  IBDT_ASSIGN_OR_RETURN(std::vector<Block> runs, elementRuns(type));
  std::sort(runs.begin(), runs.end(), [](const Block& a, const Block& b) { return a.offset < b.offset; });
  for (size_t i = 1; i < runs.size(); ++i) {
    if (runs[i].offset < runs[i - 1].offset + runs[i - 1].length) {
      return makeError(Code::kInvalidArgument, "alltoallv in place: one element of the recvtype writes bytes ",
                       runs[i].offset, " to ", runs[i - 1].offset + runs[i - 1].length - 1,
                       " twice (an overlapping layout cannot be moved in place)");
    }
  }
  if (type.extent() >= type.trueExtent()) return Status::ok();  // elements do not interleave
  for (const Block& a : runs) {
    for (const Block& b : runs) {
      if (laterElementMeets(a, b, type.extent())) {
        return makeError(Code::kInvalidArgument, "alltoallv in place: elements of the recvtype overlap (extent ",
                         type.extent(), " < true extent ", type.trueExtent(), ", bytes at offset ", a.offset,
                         " of a later element meet bytes at offset ", b.offset, ")");
      }
    }
  }
  return Status::ok();
}

Result<InPlaceElements> InPlaceElements::create(const Datatype& type) {
  InPlaceElements elements;
  elements.type_ = type;
  elements.packed_ = type;
  if (type.size() == 0) return elements;
  IBDT_RETURN_IF_ERROR(checkInPlaceLayout(type));
  elements.packedBytes_ = type.size();
  elements.extent_ = type.extent();
  if (isDense(type)) return elements;
  elements.dense_ = false;
  IBDT_ASSIGN_OR_RETURN(elements.runs_, elementRuns(type));
  IBDT_ASSIGN_OR_RETURN(elements.packed_, packedType(type));
  // As many elements as 64-bit offsets of any buffer allow, far beyond any
  // real block: the Segment's loop program does not grow with its count.
  const int64_t span = std::max({type.size(), type.extent(), type.trueExtent(), int64_t{1}});
  elements.segmentElements_ = std::max<int64_t>(1, (int64_t{1} << 40) / span);
  IBDT_ASSIGN_OR_RETURN(datatype::Segment segment, datatype::Segment::create(type, elements.segmentElements_));
  elements.segment_ = std::move(segment);
  return elements;
}

void InPlaceElements::copy(const std::byte* from, bool fromPacked, std::byte* to, bool toPacked, int64_t count) const {
  if (count <= 0) return;
  if (dense_ || (fromPacked && toPacked)) {
    std::memmove(to, from, static_cast<size_t>(count * packedBytes_));
    return;
  }
  if (fromPacked || toPacked) return packedCopy(from, fromPacked, to, count);
  // Typed to typed (a piece moved inside the buffer, maybe overlapping
  // itself): element by element, downwards from the last element when
  // moving up, so no element is overwritten before it moved.
  const bool backwards = to > from;
  for (int64_t k = 0; k < count; ++k) {
    const int64_t e = backwards ? count - 1 - k : k;
    const std::byte* source = from + e * extent_;
    std::byte* target = to + e * extent_;
    for (const Block& run : runs_) {
      std::memcpy(target + run.offset, source + run.offset, static_cast<size_t>(run.length));
    }
  }
}

// Packed <-> typed never overlaps (a packed side lies outside the buffer):
// the engine's compiled pack or unpack, no per-element loop here.
void InPlaceElements::packedCopy(const std::byte* from, bool fromPacked, std::byte* to, int64_t count) const {
  for (int64_t done = 0; done < count;) {
    const int64_t n = std::min(count - done, segmentElements_);
    const int64_t bytes = n * packedBytes_;
    // Cannot fail: [0, bytes) lies within the segment by construction of n.
    Status status = fromPacked ? segment_->unpack(at(to, done), 0, bytes, from + done * packedBytes_)
                               : segment_->pack(at(const_cast<std::byte*>(from), done), 0, bytes,
                                                to + done * packedBytes_);
    (void)status;
    done += n;
  }
}

}  // namespace ibdt::collectives
