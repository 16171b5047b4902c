// datatype/type_map.cc — the explicit MPI type map, for tests and debugging.
#include "datatype/type_impl.h"
#include "datatype/walk.h"

namespace ibdt::datatype {
namespace {

struct ByteMapOp {
  std::vector<TypeMapEntry>* out;
  int64_t shift;
  bool run(int64_t at, int64_t bytes) {
    for (int64_t i = 0; i < bytes; ++i) out->push_back({BasicKind::kByte, shift + at + i});
    return true;
  }
  bool runs(int64_t at, int64_t count, int64_t bytes, int64_t stride) {
    for (int64_t i = 0; i < count; ++i) run(at + i * stride, bytes);
    return true;
  }
  bool runsAt(int64_t origin, const int64_t* displs, int64_t count, int64_t bytes) {
    for (int64_t i = 0; i < count; ++i) run(origin + displs[i], bytes);
    return true;
  }
};

void emit(const TypeImpl& t, int64_t at, std::vector<TypeMapEntry>& out) {
  switch (t.form) {
    case Form::kBasic:
      out.push_back({t.basic, at});
      return;
    case Form::kResized:
      emit(*t.children[0].impl(), at, out);
      return;
    case Form::kLayout: {
      ByteMapOp op{&out, at};
      if (!t.program.empty()) Walker<ByteMapOp>(op).all(*t.program.node, t.program.shift);
      return;
    }
    case Form::kVector:
    case Form::kIndexed:
    case Form::kStruct:
      for (size_t i = 0; i < t.blockCount(); ++i) {
        const TypeImpl& c = *t.child(i).impl();
        const int64_t disp = t.form == Form::kVector ? static_cast<int64_t>(i) * t.stride : t.displs[i];
        const int64_t blen = t.form == Form::kVector ? t.blocklen : t.blockLength(i);
        for (int64_t k = 0; k < blen; ++k) emit(c, at + disp + k * c.extent(), out);
      }
      return;
  }
}

}  // namespace

Result<std::vector<TypeMapEntry>> typeMap(const Datatype& type, int64_t maxEntries) {
  IBDT_RETURN_IF_ERROR(checkHandle(type, "type map", false));
  const int64_t entries = type.impl()->form == Form::kLayout ? type.size() : type.impl()->signature.elements;
  if (entries > maxEntries) {
    return makeError(Code::kOverflow, "type map: ", entries, " entries exceed the limit of ", maxEntries);
  }
  std::vector<TypeMapEntry> out;
  out.reserve(static_cast<size_t>(entries));
  emit(*type.impl(), 0, out);
  return out;
}

}  // namespace ibdt::datatype
