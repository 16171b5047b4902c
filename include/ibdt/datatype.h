// ibdt/datatype.h — derived datatypes: construction, commit, pack/unpack,
// scatter/gather lists, statistics, signatures and the wire format.
//
// Semantics follow MPI (type maps, lb/ub/extent/true extent/size), with
// 64-bit counts and displacements: any overflow is a Code::kOverflow error,
// never a wrap. A Datatype is a cheap-to-copy handle to an immutable
// description. commit() compiles it into a small loop program (Gropp, Lusk,
// Swider: contiguous, strided, block-indexed and indexed kernels, adjacent
// blocks merged and loops fused); only committed types can be packed.
// Committed types are immutable and may be used from several threads.
//
// Byte ranges. `count` elements of a type describe a packed stream of
// count * size() bytes. Segment packs, unpacks or lists the (address, length)
// pieces of any byte range [first, last) of that stream; ranges may start or
// end inside a block and inside a basic element, and each call seeks in
// O(depth * log blocks), so a message can be processed chunk by chunk.
#pragma once

#include <algorithm>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "ibdt/status.h"

namespace ibdt::datatype {

// Predefined (basic) types. The numeric values are part of the wire format
// and of signatures: append only.
enum class BasicKind : uint8_t {
  kByte = 1, kChar, kBool,
  kInt8, kInt16, kInt32, kInt64, kUint8, kUint16, kUint32, kUint64,
  kFloat, kDouble, kLongDouble, kFloatComplex, kDoubleComplex,
};
inline constexpr int kBasicKindCount = 16;

// Storage order of subarray/darray dimensions.
enum class Order : uint8_t { kC, kFortran };

// darray distribution of one dimension (MPI_DISTRIBUTE_*).
enum class Distribution : uint8_t { kBlock, kCyclic, kNone };
inline constexpr int64_t kDefaultDistArg = -1;  // MPI_DISTRIBUTE_DFLT_DARG

struct TypeImpl;

class Datatype {
 public:
  Datatype() = default;  // null handle: every operation on it is an error

  // --- Predefined types (already committed) ---
  static Datatype basic(BasicKind kind);
  template <typename T> static Datatype of();  // Datatype::of<double>()

  // --- MPI constructors. Counts and block lengths must be >= 0. ---
  static Result<Datatype> contiguous(int64_t count, const Datatype& old);
  // `stride` in elements of old's extent (vector) or in bytes (hvector).
  static Result<Datatype> vector(int64_t count, int64_t blocklen, int64_t stride, const Datatype& old);
  static Result<Datatype> hvector(int64_t count, int64_t blocklen, int64_t strideBytes, const Datatype& old);
  // Displacements in multiples of old's extent (indexed*) or in bytes (hindexed*).
  static Result<Datatype> indexed(std::span<const int64_t> blocklens, std::span<const int64_t> displs,
                                  const Datatype& old);
  static Result<Datatype> hindexed(std::span<const int64_t> blocklens, std::span<const int64_t> displsBytes,
                                   const Datatype& old);
  static Result<Datatype> indexedBlock(int64_t blocklen, std::span<const int64_t> displs, const Datatype& old);
  static Result<Datatype> hindexedBlock(int64_t blocklen, std::span<const int64_t> displsBytes,
                                        const Datatype& old);
  // MPI_Type_create_struct. As in MPI implementations, the upper bound is
  // padded to the largest alignment of the basic types inside, unless a
  // member type carries explicit bounds (was resized).
  static Result<Datatype> structType(std::span<const int64_t> blocklens, std::span<const int64_t> displsBytes,
                                     std::span<const Datatype> types);
  // New lower bound and extent (extent >= 0); data positions unchanged.
  static Result<Datatype> resized(const Datatype& old, int64_t lb, int64_t extent);
  static Result<Datatype> subarray(std::span<const int64_t> sizes, std::span<const int64_t> subsizes,
                                   std::span<const int64_t> starts, Order order, const Datatype& old);
  // MPI_Type_create_darray. Processes are numbered row-major in the grid
  // `psizes` (as MPI requires) whatever the array order.
  static Result<Datatype> darray(int64_t size, int64_t rank, std::span<const int64_t> gsizes,
                                 std::span<const Distribution> distribs, std::span<const int64_t> dargs,
                                 std::span<const int64_t> psizes, Order order, const Datatype& old);
  static Result<Datatype> dup(const Datatype& old);

  // --- Träff, Rougier, Hunold (2014) constructors. Units: elements of old. ---
  //
  // Bounded vector: blocks of `blocklen` elements every `stride` elements,
  // as many as start before `bound`; the last block is cut at `bound`.
  // Element j (0 <= j < bound) is in the type iff j % stride < blocklen.
  // Bounds: lb = lb(old) and ub = ub of the last selected element (as for
  // struct{vector, contiguous} without alignment padding); explicit (sticky).
  //   Example (Listing 1, p = 13, round k = 4): boundedVector(9, 4, 8, T)
  //   selects elements {0,1,2,3,8}; at offset 4*extent(T) in R that is
  //   R[4..7] and R[12] — exactly the j with bit 2 set.
  static Result<Datatype> boundedVector(int64_t bound, int64_t blocklen, int64_t stride, const Datatype& old);
  // Circular vector over a ring of `total` elements: the bounded vector
  // pattern (bound, blocklen, stride) laid out from element `start`, wrapping
  // from total-1 to 0. Relative element j (j < bound, j % stride < blocklen)
  // sits at element (start + j) % total. Requires 0 <= start < total and
  // bound <= total. Type map order follows j (the order data is packed);
  // lb = lb(old), extent = total elements (the whole ring).
  //   Example (Listing 2, p = 13, k = 4, rank i = 3, recvrank = 7):
  //   circularVector(13, 7, 9, 4, 8, T) selects elements 7,8,9,10 and then
  //   (7+8)%13 = 2, in that order: R[(i+j) % 13] for j in {4,5,6,7,12}.
  static Result<Datatype> circularVector(int64_t total, int64_t start, int64_t bound, int64_t blocklen,
                                         int64_t stride, const Datatype& old);
  // Bucket: buckets of `maxBucket` elements laid end to end; bucket i holds
  // its first counts[i] elements (counts[i] <= maxBucket). lb = lb(old),
  // extent = counts.size() * maxBucket elements. Example: bucket(4, {1,3,0}, T)
  // selects elements {0, 4,5,6} with extent 12 elements.
  static Result<Datatype> bucket(int64_t maxBucket, std::span<const int64_t> counts, const Datatype& old);

  // Compiles the loop program; idempotent and thread-safe. Predefined and
  // deserialised types are committed already.
  Status commit();
  // Releases this handle (MPI_Type_free). Other copies stay usable; using this
  // one afterwards is an error (Code::kState). The id is recycled once the last
  // copy is gone, always with a new version.
  void free();

  bool valid() const { return impl_ != nullptr; }
  bool freed() const { return freed_; }
  bool committed() const;

  // MPI queries (bytes). Zero for a null handle.
  int64_t size() const;
  int64_t lb() const;
  int64_t ub() const;
  int64_t extent() const;
  int64_t trueLb() const;
  int64_t trueUb() const;
  int64_t trueExtent() const;
  // True when `count` elements are one dense run of count*size() bytes.
  bool contiguous() const;
  // Layout identity for peer caches keyed by (id, version).
  uint32_t id() const;
  uint32_t version() const;

  // Internal (datatype/ uses these to build and inspect types).
  const TypeImpl* impl() const { return impl_.get(); }
  explicit Datatype(std::shared_ptr<const TypeImpl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<const TypeImpl> impl_;
  bool freed_ = false;
};

// One explicit entry of an MPI type map.
struct TypeMapEntry {
  BasicKind kind;
  int64_t displacement;
  bool operator==(const TypeMapEntry&) const = default;
};
// The type map of `type` (at most `maxEntries` entries, else kOverflow).
Result<std::vector<TypeMapEntry>> typeMap(const Datatype& type, int64_t maxEntries = int64_t{1} << 24);

// A run of bytes; `offset` is relative to the buffer base (may be negative).
struct Block {
  int64_t offset;
  int64_t length;
  bool operator==(const Block&) const = default;
};
// The runs of `count` elements with adjacent runs merged, in type-map order.
Result<std::vector<Block>> flatten(const Datatype& type, int64_t count);

struct Stats {
  int64_t size = 0;         // packed bytes of `count` elements
  int64_t extent = 0;       // of one element
  int64_t trueExtent = 0;   // of one element
  int64_t blockCount = 0;   // merged runs of `count` elements (== flatten().size())
  double meanBlock = 0;
  double medianBlock = 0;   // lower median of the run lengths
  double stddevBlock = 0;   // population standard deviation
  bool contiguous = false;
};
// Computed from the loop program without listing every run when the type is
// regular (cost ~ number of distinct run patterns, not number of runs).
Result<Stats> stats(const Datatype& type, int64_t count);

// An (address, length) pair of a scatter/gather list. The address is a plain
// integer so that a remote peer's layout can be walked against its address.
struct Iovec {
  uint64_t address;
  uint64_t length;
};
struct IovecFill {
  size_t entries = 0;   // entries written
  int64_t bytes = 0;    // bytes of the range they cover (resume at first + bytes)
};

// count elements of a committed type, seen as a packed byte stream.
class Segment {
 public:
  static Result<Segment> create(const Datatype& type, int64_t count);

  int64_t size() const { return size_; }  // packed bytes

  // Copies packed bytes [first, last) from the typed buffer at `base` to dst.
  Status pack(const void* base, int64_t first, int64_t last, void* dst) const;
  // Copies packed bytes [first, last) from src into the typed buffer at `base`.
  Status unpack(void* base, int64_t first, int64_t last, const void* src) const;
  // Writes the runs of [first, last) (adjacent runs merged) into out[0..max).
  // Stops early when `out` is full; `bytes` tells how far it got.
  Result<IovecFill> iovecs(uint64_t base, int64_t first, int64_t last, Iovec* out, size_t maxEntries) const;

  // Streaming use: a position that packNext/unpackNext advance. The range
  // calls above are const and may run concurrently; the position is not
  // shared between copies of a Segment.
  int64_t position() const { return position_; }
  Status seek(int64_t position);
  // Packs up to maxBytes from the current position; returns the bytes done.
  Result<int64_t> packNext(const void* base, void* dst, int64_t maxBytes);
  Result<int64_t> unpackNext(void* base, const void* src, int64_t maxBytes);

  // Offset from the buffer base of the bytes when they are one dense run
  // (a contiguous type: pack and unpack are then one copy), else -1.
  int64_t denseOffset() const { return dense_; }

  struct Program;  // compiled loop program of count x type (internal)
  const Program& program() const { return *program_; }

 private:
  Segment(std::shared_ptr<const Program> program, int64_t size) : program_(std::move(program)), size_(size) {}
  Status checkRange(int64_t first, int64_t last) const;

  std::shared_ptr<const Program> program_;
  int64_t size_ = 0;
  int64_t position_ = 0;
  int64_t dense_ = -1;
};

// --- Signatures (sequence of basic types) ---
//
// A signature is the number of basic elements and a polynomial hash of their
// kinds modulo 2^61-1; prefixes and repetitions are computed from the type
// description in O(depth * log count), never by listing elements. Matching is
// therefore probabilistic (collision chance ~ n / 2^61 for n elements).
struct Signature {
  uint64_t hash = 0;
  int64_t elements = 0;
  bool operator==(const Signature&) const = default;
};
Result<Signature> signature(const Datatype& type, int64_t count);
// Ok when `sendCount` x sendType is a prefix of `recvCount` x recvType (equal
// basic-type sequence, receive possibly longer); kTruncated when the send is
// longer; kInvalidArgument naming the mismatch otherwise.
Status checkMatch(const Datatype& sendType, int64_t sendCount, const Datatype& recvType, int64_t recvCount);
// The same check on the receiver, given the sender's signature (e.g. from a
// rendezvous request) instead of its type.
Status checkMatch(const Signature& send, const Datatype& recvType, int64_t recvCount);
// Typed copy of packed bytes [first, last) from (src, srcCount x srcType)
// to the same packed bytes of (dst, dstCount x dstType); the signatures of the
// two must match on that range. Buffers must not overlap.
Status transpack(const void* src, const Datatype& srcType, int64_t srcCount, void* dst, const Datatype& dstType,
                 int64_t dstCount, int64_t first, int64_t last);

// transpack() prepared once and run many times (a persistent collective's
// own block): the segments are built and the signatures matched at create(),
// and a side that is one dense run is copied straight, without a bounce.
class TypedCopy {
 public:
  static Result<TypedCopy> create(const Datatype& srcType, int64_t srcCount, const Datatype& dstType,
                                  int64_t dstCount);
  // Packed bytes both sides hold: a run may copy any range within them.
  int64_t size() const { return std::min(from_.size(), to_.size()); }
  Status run(const void* src, void* dst, int64_t first, int64_t last) const;

 private:
  TypedCopy(Segment from, Segment to);
  Segment from_, to_;
  int64_t srcDense_ = -1;  // offset of the one dense run of the source, or -1
  int64_t dstDense_ = -1;
};

// --- Wire format ---
//
// A compact, versioned encoding of a committed type's layout (loop program,
// bounds, size and signature). deserialize() treats the bytes as hostile:
// malformed input gives Code::kProtocol, never a crash, an out-of-bounds
// access or an allocation larger than a small multiple of the input. The
// result is a committed layout-only type (its type map is bytes).
Result<std::vector<uint8_t>> serialize(const Datatype& type);
Result<Datatype> deserialize(std::span<const uint8_t> bytes);
// The sender's (id, version) recorded in a blob, read without decoding the
// layout: the key under which a peer caches the decoded type.
struct LayoutKey {
  uint32_t id = 0;
  uint32_t version = 0;
  bool operator==(const LayoutKey&) const = default;
};
Result<LayoutKey> layoutKey(std::span<const uint8_t> bytes);

// Name of a basic kind ("double"); size in bytes.
const char* basicName(BasicKind kind);
int64_t basicSize(BasicKind kind);

// --- template definitions ---
template <typename T>
struct BasicKindOf;
#define IBDT_BASIC_KIND_OF_(T, K) \
  template <>                     \
  struct BasicKindOf<T> {         \
    static constexpr BasicKind value = BasicKind::K; \
  }
IBDT_BASIC_KIND_OF_(std::byte, kByte);
IBDT_BASIC_KIND_OF_(char, kChar);
IBDT_BASIC_KIND_OF_(bool, kBool);
IBDT_BASIC_KIND_OF_(int8_t, kInt8);
IBDT_BASIC_KIND_OF_(int16_t, kInt16);
IBDT_BASIC_KIND_OF_(int32_t, kInt32);
IBDT_BASIC_KIND_OF_(int64_t, kInt64);
IBDT_BASIC_KIND_OF_(uint8_t, kUint8);
IBDT_BASIC_KIND_OF_(uint16_t, kUint16);
IBDT_BASIC_KIND_OF_(uint32_t, kUint32);
IBDT_BASIC_KIND_OF_(uint64_t, kUint64);
IBDT_BASIC_KIND_OF_(float, kFloat);
IBDT_BASIC_KIND_OF_(double, kDouble);
IBDT_BASIC_KIND_OF_(long double, kLongDouble);
IBDT_BASIC_KIND_OF_(std::complex<float>, kFloatComplex);
IBDT_BASIC_KIND_OF_(std::complex<double>, kDoubleComplex);
#undef IBDT_BASIC_KIND_OF_

template <typename T>
Datatype Datatype::of() {
  return basic(BasicKindOf<T>::value);
}

}  // namespace ibdt::datatype
