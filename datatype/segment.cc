// datatype/segment.cc — pack/unpack and scatter/gather lists over byte
// ranges of count x type, and flatten.
#include <algorithm>
#include <cstring>

#include "base/checked_math.h"
#include "base/copy_bytes.h"
#include "datatype/copy_kernels.h"
#include "datatype/segment_program.h"
#include "datatype/type_impl.h"
#include "datatype/walk.h"

namespace ibdt::datatype {

namespace {

template <bool kPack>
struct CopyOp {
  uintptr_t typed;  // buffer base
  char* packed;     // advances as runs are copied

  bool run(int64_t at, int64_t bytes) {
    char* t = reinterpret_cast<char*>(typed + static_cast<uintptr_t>(at));
    // One run can be a whole message: copyBytes avoids memcpy's slow distances.
    if constexpr (kPack) {
      copyBytes(packed, t, static_cast<size_t>(bytes));
    } else {
      copyBytes(t, packed, static_cast<size_t>(bytes));
    }
    packed += bytes;
    return true;
  }
  bool runs(int64_t at, int64_t count, int64_t bytes, int64_t stride) {
    copyRuns<kPack>(packed, typed + static_cast<uintptr_t>(at), count, bytes, stride, nullptr);
    packed += count * bytes;
    return true;
  }
  bool runsAt(int64_t origin, const int64_t* displs, int64_t count, int64_t bytes) {
    copyRuns<kPack>(packed, typed + static_cast<uintptr_t>(origin), count, bytes, 0, displs);
    packed += count * bytes;
    return true;
  }
};

// Base class for ops that only look at each run.
template <typename Derived>
struct RunOp {
  bool runs(int64_t at, int64_t count, int64_t bytes, int64_t stride) {
    for (int64_t i = 0; i < count; ++i) {
      if (!static_cast<Derived*>(this)->run(at + i * stride, bytes)) return false;
    }
    return true;
  }
  bool runsAt(int64_t origin, const int64_t* displs, int64_t count, int64_t bytes) {
    for (int64_t i = 0; i < count; ++i) {
      if (!static_cast<Derived*>(this)->run(origin + displs[i], bytes)) return false;
    }
    return true;
  }
};

struct IovecOp : RunOp<IovecOp> {
  uint64_t base;
  Iovec* out;
  size_t max;
  IovecFill fill;

  IovecOp(uint64_t b, Iovec* o, size_t m) : base(b), out(o), max(m) {}
  bool run(int64_t at, int64_t bytes) {
    const uint64_t address = base + static_cast<uint64_t>(at);
    if (fill.entries > 0 && out[fill.entries - 1].address + out[fill.entries - 1].length == address) {
      out[fill.entries - 1].length += static_cast<uint64_t>(bytes);
    } else {
      if (fill.entries == max) return false;
      out[fill.entries++] = {address, static_cast<uint64_t>(bytes)};
    }
    fill.bytes += bytes;
    return true;
  }
};

struct FlattenOp : RunOp<FlattenOp> {
  std::vector<Block> blocks;
  bool run(int64_t at, int64_t bytes) {
    if (!blocks.empty() && blocks.back().offset + blocks.back().length == at) {
      blocks.back().length += bytes;
    } else {
      blocks.push_back({at, bytes});
    }
    return true;
  }
};

}  // namespace

Result<Segment> Segment::create(const Datatype& type, int64_t count) {
  IBDT_RETURN_IF_ERROR(checkHandle(type, "segment", true));
  if (count < 0) return makeError(Code::kInvalidArgument, "segment: negative count ", count);
  const TypeImpl& t = *type.impl();
  Checked m;
  const int64_t size = m.mul(count, t.size);
  if (count > 0) {  // every byte touched must have an address within 64 bits
    const int64_t last = m.mul(count - 1, t.extent());
    m.add(last, t.trueUb);
    m.add(last, t.trueLb);
  }
  if (m.overflow) {
    return makeError(Code::kOverflow, "segment: ", count, " elements of type ", type.id(), " (size ", t.size,
                     ", extent ", t.extent(), ") exceed 64-bit offsets");
  }
  auto program = std::make_shared<Program>();
  IBDT_ASSIGN_OR_RETURN(program->root, makeRepeat(count, t.extent(), programOf(t)));
  Segment segment(std::move(program), size);
  // One dense run: found once here, so that every pack and unpack of a
  // contiguous message is a copy instead of a walk (the eager path's
  // 512-byte message spent 200 instructions walking).
  Iovec run{};
  auto fill = size == 0 ? Result<IovecFill>(IovecFill{}) : segment.iovecs(0, 0, size, &run, 1);
  if (fill.isOk() && fill->bytes == size) segment.dense_ = static_cast<int64_t>(run.address);
  return segment;
}

Status Segment::checkRange(int64_t first, int64_t last) const {
  if (first < 0 || first > last || last > size_) {
    return makeError(Code::kOutOfRange, "segment: byte range [", first, ", ", last, ") outside [0, ", size_, ")");
  }
  return Status::ok();
}

Status Segment::pack(const void* base, int64_t first, int64_t last, void* dst) const {
  IBDT_RETURN_IF_ERROR(checkRange(first, last));
  if (first == last) return Status::ok();
  if (dense_ >= 0) {
    copyBytes(dst, static_cast<const char*>(base) + dense_ + first, static_cast<size_t>(last - first));
    return Status::ok();
  }
  CopyOp<true> op{reinterpret_cast<uintptr_t>(base), static_cast<char*>(dst)};
  Walker<CopyOp<true>>(op).range(*program_->root.node, program_->root.shift, first, last);
  return Status::ok();
}

Status Segment::unpack(void* base, int64_t first, int64_t last, const void* src) const {
  IBDT_RETURN_IF_ERROR(checkRange(first, last));
  if (first == last) return Status::ok();
  if (dense_ >= 0) {
    copyBytes(static_cast<char*>(base) + dense_ + first, src, static_cast<size_t>(last - first));
    return Status::ok();
  }
  CopyOp<false> op{reinterpret_cast<uintptr_t>(base), const_cast<char*>(static_cast<const char*>(src))};
  Walker<CopyOp<false>>(op).range(*program_->root.node, program_->root.shift, first, last);
  return Status::ok();
}

Result<IovecFill> Segment::iovecs(uint64_t base, int64_t first, int64_t last, Iovec* out, size_t maxEntries) const {
  IBDT_RETURN_IF_ERROR(checkRange(first, last));
  IovecOp op(base, out, maxEntries);
  if (first < last) Walker<IovecOp>(op).range(*program_->root.node, program_->root.shift, first, last);
  return op.fill;
}

Status Segment::seek(int64_t position) {
  IBDT_RETURN_IF_ERROR(checkRange(position, position));
  position_ = position;
  return Status::ok();
}

Result<int64_t> Segment::packNext(const void* base, void* dst, int64_t maxBytes) {
  if (maxBytes < 0) return makeError(Code::kInvalidArgument, "segment: negative byte count ", maxBytes);
  const int64_t n = std::min(maxBytes, size_ - position_);
  IBDT_RETURN_IF_ERROR(pack(base, position_, position_ + n, dst));
  position_ += n;
  return n;
}

Result<int64_t> Segment::unpackNext(void* base, const void* src, int64_t maxBytes) {
  if (maxBytes < 0) return makeError(Code::kInvalidArgument, "segment: negative byte count ", maxBytes);
  const int64_t n = std::min(maxBytes, size_ - position_);
  IBDT_RETURN_IF_ERROR(unpack(base, position_, position_ + n, src));
  position_ += n;
  return n;
}

Result<std::vector<Block>> flatten(const Datatype& type, int64_t count) {
  IBDT_ASSIGN_OR_RETURN(Segment segment, Segment::create(type, count));
  FlattenOp op;
  const NodeRef& root = segment.program().root;
  if (!root.empty()) Walker<FlattenOp>(op).all(*root.node, root.shift);
  return std::move(op.blocks);
}

}  // namespace ibdt::datatype
