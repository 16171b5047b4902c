// collectives/inplace_elements.h — the elements of the in-place alltoallv's
// one buffer, addressed through the receive type (docs/alltoallv.md,
// "In-place with derived types").
//
// The algorithm's index sets count elements: element n of the buffer is one
// element of the receive type whose origin is base + n * extent. In the
// buffer an element keeps the type's layout (its data runs, holes left
// untouched); everywhere else (auxiliary buffers, the copy path's copy,
// inline blocks in control messages) it is held packed: size() bytes in the
// type's map order, so holes cost no auxiliary memory. Packing and unpacking
// go through the datatype engine (a Segment compiled once); moving pieces
// inside the buffer is element by element in the order that never
// overwrites an element still to be moved, which needs only that elements
// at different positions share no byte: checkInPlaceLayout() refuses any
// other type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "ibdt/datatype.h"
#include "ibdt/status.h"

namespace ibdt::collectives {

// Ok when no two elements of `type` at different positions of a buffer (and
// no two runs of one element) share a byte, so that blocks can be moved
// element by element; else kInvalidArgument naming what overlaps.
Status checkInPlaceLayout(const datatype::Datatype& type);

class InPlaceElements {
 public:
  // A committed type that checkInPlaceLayout() accepts. A type of size 0
  // moves nothing; it is handled as one byte so that sizes stay positive.
  static Result<InPlaceElements> create(const datatype::Datatype& type);

  int64_t packedBytes() const { return packedBytes_; }  // one element, packed
  // The element's type in the buffer, and its packed form (same signature,
  // dense): the type of messages to or from an auxiliary buffer or the copy.
  const datatype::Datatype& type() const { return type_; }
  const datatype::Datatype& packed() const { return packed_; }
  // Origin of element `index` of the buffer at `base`.
  std::byte* at(std::byte* base, int64_t index) const { return base + index * extent_; }
  // `count` elements from `from` to `to`, each side in the buffer's layout
  // (typed) or packed. Typed to typed may overlap (a piece moved inside
  // the buffer); other directions must not.
  void copy(const std::byte* from, bool fromPacked, std::byte* to, bool toPacked, int64_t count) const;
  int64_t bytes() const { return static_cast<int64_t>(runs_.capacity() * sizeof(datatype::Block)); }
  // Elements one engine call packs or unpacks at most (see segment_).
  int64_t segmentElements() const { return segmentElements_; }

  InPlaceElements() = default;  // one dense byte, until create()

 private:
  void packedCopy(const std::byte* from, bool fromPacked, std::byte* to, int64_t count) const;

  datatype::Datatype type_, packed_;
  int64_t packedBytes_ = 1, extent_ = 1;
  bool dense_ = true;                  // one run of packedBytes_ at offset 0 and extent == size
  std::vector<datatype::Block> runs_;  // one element's data, relative to its origin, in type-map order
  // segmentElements_ x type for packed <-> typed copies, compiled once: a
  // copy of n elements is packed bytes [0, n size) of it, at the first
  // element's origin (longer copies take several calls).
  std::optional<datatype::Segment> segment_;
  int64_t segmentElements_ = 0;
};

}  // namespace ibdt::collectives
